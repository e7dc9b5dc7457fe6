//! Sleep mode: the engine is dropped, so its device (weights, KV cache, every buffer) and the
//! GPU memory it held go back to the system, while the server stays up; the first request,
//! or `wake_up`, builds it again with the factory, as after a lost device. What the disk tier
//! holds stays there (its waiting blocks are written first), so prompts cached before the
//! sleep are read back from disk after it; what was only on the GPU or in the CPU tier is
//! gone, and KV-event subscribers are told so (`AllBlocksCleared`). vLLM's `/sleep` levels differ in whether the weights are kept in host memory: kiln
//! reads them again from the mapped model file either way.

use std::sync::atomic::Ordering;
use std::time::Instant;

use kiln_engine::Engine;

use super::thread::Loop;
use super::{Command, EngineFactory};

impl Loop {
    /// Drops `engine` and waits for work: `None` when every handle is gone, otherwise the
    /// engine built again, with the command that woke it left for the next `run`.
    pub(super) fn sleep(&mut self, mut engine: Engine, factory: &EngineFactory) -> Option<Engine> {
        let (flushed, wait) = flume::bounded(1);
        self.disk.flush(&mut engine, flushed);
        let _ = wait.recv();
        self.disk.stop();
        self.pins.clear();
        let blocks = engine.runner_config().num_blocks;
        self.publish(&mut engine);
        drop(engine);
        // Subscribers to the KV events drop this replica's blocks now, not at the wake.
        if let Some(tx) = &self.kv_events {
            let _ = tx.send(vec![kiln_engine::KvEvent::AllBlocksCleared]);
        }
        self.health.sleeping.store(true, Ordering::SeqCst);
        self.health.sleeps.fetch_add(1, Ordering::Relaxed);
        tracing::info!("the engine sleeps: its device and {blocks} KV blocks are given back");
        if let Some(done) = self.sleep_asked.take() {
            let _ = done.send(Ok(()));
        }
        loop {
            match self.rx.recv().ok()? {
                Command::Sleep(done) => {
                    let _ = done.send(Ok(()));
                }
                Command::SleepAfterIdle(idle) => self.sleep_after_idle = idle,
                // Nothing runs, waits or is waiting to be written.
                Command::Abort(_) | Command::DiskRead(_) => {}
                Command::FlushDisk(done) => {
                    let _ = done.send(());
                }
                cmd => {
                    let t0 = Instant::now();
                    let engine = self.build(factory, "waking the engine");
                    self.health.sleeping.store(false, Ordering::SeqCst);
                    tracing::info!("the engine woke in {:.2} s", t0.elapsed().as_secs_f64());
                    match cmd {
                        Command::WakeUp(done) => {
                            let _ = done.send(Ok(()));
                        }
                        cmd => self.next = Some(cmd),
                    }
                    return Some(engine);
                }
            }
        }
    }
}
