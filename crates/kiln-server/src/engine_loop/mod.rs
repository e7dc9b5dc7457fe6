//! The engine layer: ONE std::thread owns the [`Engine`] and drives `step()` with
//! `pollster::block_on`. Handlers talk to it through a flume channel of [`Command`]s; each
//! request's updates go back on its own channel. The thread blocks on the command channel
//! when there is nothing to run. A request whose update receiver is gone (client disconnected)
//! is aborted before the next step, which frees its KV blocks.
//!
//! The thread supervises the engine: a failed step fails only that step's requests (each gets
//! a clear error) and the loop goes on; a lost device or a panic fails every request in flight,
//! marks the server down (`/health` 503 with the reason) and rebuilds the engine with the
//! factory, after which the server is up again. The engine also sleeps on request (or after
//! an idle time): it is dropped, giving back its GPU memory, and built again by the first
//! request or `wake_up` (`sleep.rs`). This file is the handlers' side and the thread's start;
//! `thread.rs` is the thread's loop.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kiln_engine::disk_tier::{DiskTierConfig, DiskTierStats};
use kiln_engine::{Constraint, Engine, Request, RequestUpdate, SchedulerStats};

use crate::disk_tier::DiskLoop;
use crate::health::Health;
use crate::kv_transfer::pins::{Pins, TransferCommand};

mod lora;
mod sleep;
mod thread;
pub use lora::{LoraCommand, LoraRegistry};
use thread::{Loop, Stop};

/// Builds the engine on the engine thread (so the engine never has to be `Send`); called again
/// to rebuild it after a lost device.
pub type EngineFactory = Box<dyn Fn() -> anyhow::Result<Engine> + Send>;

pub enum Command {
    Add {
        request: Request,
        constraint: Option<Box<Constraint>>,
        updates: flume::Sender<SeqEvent>,
    },
    Abort(u64),
    /// Prefill/decode split: pins, exports, imports (`kv_transfer`).
    Transfer(TransferCommand),
    /// Writes every block waiting for the disk tier, then answers (a shutdown's last step).
    FlushDisk(flume::Sender<()>),
    /// Blocks the disk tier's reader read for a held request (sent by that thread).
    DiskRead(kiln_engine::disk_tier::Loaded),
    /// Empties the prefix cache (and the disk tier's folder), then answers what it dropped.
    ResetPrefixCache(flume::Sender<Result<CacheReset, String>>),
    /// Loads or unloads a LoRA adapter (`lora.rs`).
    Lora(LoraCommand),
    /// Drops the engine, giving back its GPU memory, once no request runs or waits (refused
    /// otherwise); answers when it sleeps (`sleep.rs`).
    Sleep(flume::Sender<Result<(), String>>),
    /// Builds the engine again if it sleeps; answers when it serves.
    WakeUp(flume::Sender<Result<(), String>>),
    /// Sleep after this long without requests (`None`: only when asked).
    SleepAfterIdle(Option<Duration>),
}

/// What `POST /reset_prefix_cache` let go of: cached blocks no request held.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct CacheReset {
    pub gpu_blocks: usize,
    pub cpu_blocks: usize,
    /// Block files removed from the disk tier's folder.
    pub disk_blocks: usize,
}

#[derive(Debug)]
pub enum SeqEvent {
    Update(RequestUpdate),
    /// The engine refused the request (an admission rule): a client error.
    Rejected(String),
    /// The engine failed while running the request.
    Error(String),
}

/// What the engine settled on, reported once at start.
#[derive(Clone, Debug)]
pub struct EngineInfo {
    pub adapter: String,
    pub max_len: usize,
    pub num_gpu_blocks: usize,
    pub num_cpu_blocks: usize,
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: usize,
    /// Entries of the runner's penalty pool, which the penalty lists of running requests
    /// share (a request with penalties may reach this many distinct tokens).
    pub max_penalty_entries: usize,
    pub kv_layout: kiln_engine::KvLayout,
    /// Bytes of device memory the engine takes, and the device's own where it tells it.
    pub gpu_bytes: (u64, Option<kiln_gpu::DeviceMemory>),
    /// The model's hidden size (an embedding's dimensions).
    pub hidden_size: usize,
    /// The model's shape, which an adapter loaded later is checked against.
    pub model: Arc<kiln_model::ModelConfig>,
    /// Whether adapters can be loaded while the engine runs.
    pub lora_loadable: bool,
}

/// The handlers' side of the engine thread.
pub struct EngineHandle {
    pub(crate) commands: flume::Sender<Command>,
    next_id: AtomicU64,
    /// Adds sent but not yet taken by the engine thread.
    pending: Arc<AtomicUsize>,
    stats: Arc<Mutex<SchedulerStats>>,
    disk_stats: Arc<Mutex<Option<DiskTierStats>>>,
    pub health: Arc<Health>,
    pub info: EngineInfo,
    /// The engine's LoRA adapters, by id.
    pub lora: LoraRegistry,
}

fn info_of(engine: &Engine) -> EngineInfo {
    let rc = engine.runner_config();
    EngineInfo {
        adapter: engine.gpu().describe(),
        max_len: engine.max_len(),
        num_gpu_blocks: rc.num_blocks,
        num_cpu_blocks: rc.num_cpu_blocks,
        max_num_seqs: rc.max_seqs,
        max_num_batched_tokens: rc.max_tokens,
        max_penalty_entries: engine.scheduler().config().max_penalty_entries,
        kv_layout: engine.kv_layout(),
        gpu_bytes: (engine.gpu_bytes(), engine.gpu().device_memory()),
        hidden_size: engine.model_config().hidden_size,
        model: Arc::new(engine.model_config().clone()),
        lora_loadable: engine.lora_loadable(),
    }
}

/// Where the engine thread sends each step's KV-cache events.
pub type KvEventTx = flume::Sender<Vec<kiln_engine::KvEvent>>;

impl EngineHandle {
    /// Starts the engine thread and waits until the engine is built. When `kv_events` is set,
    /// the engine records KV-cache events and sends each step's batch there (a rebuilt engine
    /// starts again with `AllBlocksCleared`). With `kv_disk` cached blocks are also kept in
    /// files there (`disk_tier`).
    pub fn spawn(
        factory: EngineFactory,
        kv_events: Option<KvEventTx>,
        kv_disk: Option<DiskTierConfig>,
    ) -> anyhow::Result<EngineHandle> {
        let (tx, rx) = flume::unbounded();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(Mutex::new(SchedulerStats::default()));
        let health = Arc::new(Health::default());
        let lora = LoraRegistry::default();
        let mut lp = Loop {
            rx,
            active: HashMap::new(),
            pending: pending.clone(),
            stats: stats.clone(),
            health: health.clone(),
            kv_events,
            pins: Pins::default(),
            disk: DiskLoop::new(kv_disk, tx.downgrade()),
            lora: lora.clone(),
            loaded_lora: Vec::new(),
            sleep_after_idle: None,
            sleep_asked: None,
            next: None,
        };
        let disk_stats = lp.disk.stats();
        std::thread::Builder::new()
            .name("kiln-engine".into())
            .spawn(move || {
                let mut engine = match factory() {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                if let Err(e) = lp.start(&mut engine) {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
                let _ = ready_tx.send(Ok(info_of(&engine)));
                loop {
                    let reason = match catch_unwind(AssertUnwindSafe(|| lp.run(&mut engine))) {
                        Ok(Stop::Exit) => return, // every handle is gone
                        Ok(Stop::Sleep) => match lp.sleep(engine, &factory) {
                            Some(woken) => {
                                engine = woken;
                                continue;
                            }
                            None => return,
                        },
                        Ok(Stop::Failed(reason)) => reason,
                        Err(panic) => {
                            let what = panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                            format!("the engine panicked: {}", what.unwrap_or_default())
                        }
                    };
                    engine = lp.restart(engine, &factory, &reason);
                }
            })?;
        let info = ready_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the engine thread died while starting"))??;
        Ok(EngineHandle {
            commands: tx,
            next_id: AtomicU64::new(1),
            pending,
            stats,
            disk_stats,
            health,
            info,
            lora,
        })
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queues a request, with the matcher that constrains its output when given; its updates
    /// arrive on the returned channel.
    pub fn add(
        &self,
        request: Request,
        constraint: Option<Constraint>,
    ) -> flume::Receiver<SeqEvent> {
        let (tx, rx) = flume::unbounded();
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self
            .commands
            .send(Command::Add {
                request,
                constraint: constraint.map(Box::new),
                updates: tx,
            })
            .is_err()
        {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
        rx
    }

    pub fn abort(&self, id: u64) {
        let _ = self.commands.send(Command::Abort(id));
    }

    /// Requests queued: waiting in the scheduler plus adds not yet taken.
    pub fn queued(&self) -> usize {
        self.stats().num_waiting + self.pending.load(Ordering::SeqCst)
    }

    /// The scheduler's counters as of the end of the last step.
    pub fn stats(&self) -> SchedulerStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (up to `within`) until the disk tier has written every block waiting; false if
    /// the time ran out or the engine thread is gone.
    pub async fn flush_disk(&self, within: Duration) -> bool {
        let (tx, rx) = flume::bounded(1);
        if self.commands.send(Command::FlushDisk(tx)).is_err() {
            return false;
        }
        matches!(
            tokio::time::timeout(within, rx.recv_async()).await,
            Ok(Ok(()))
        )
    }

    /// Empties the prefix cache of every block no request holds, on the GPU, in the CPU tier
    /// and on disk; what a running request holds stays.
    pub async fn reset_prefix_cache(&self) -> Result<CacheReset, String> {
        let (tx, rx) = flume::bounded(1);
        let gone = || "the engine thread is gone".to_string();
        (self.commands)
            .send(Command::ResetPrefixCache(tx))
            .map_err(|_| gone())?;
        rx.recv_async().await.map_err(|_| gone())?
    }

    /// Puts the engine to sleep: once no request runs or waits (refused otherwise, with how
    /// many do), it is dropped and its GPU memory given back; the cache on disk stays. The
    /// next request, or [`Self::wake_up`], builds it again. Answers once it sleeps.
    pub async fn sleep(&self) -> Result<(), String> {
        self.ask(Command::Sleep).await
    }

    /// Builds the engine again if it sleeps; answers once it serves.
    pub async fn wake_up(&self) -> Result<(), String> {
        self.ask(Command::WakeUp).await
    }

    pub fn is_sleeping(&self) -> bool {
        self.health.sleeping.load(Ordering::SeqCst)
    }

    /// Makes the engine sleep after `idle` without requests (`None`: only when asked).
    pub fn sleep_after_idle(&self, idle: Option<Duration>) {
        let _ = self.commands.send(Command::SleepAfterIdle(idle));
    }

    async fn ask(
        &self,
        command: impl FnOnce(flume::Sender<Result<(), String>>) -> Command,
    ) -> Result<(), String> {
        let (tx, rx) = flume::bounded(1);
        let gone = || "the engine thread is gone".to_string();
        self.commands.send(command(tx)).map_err(|_| gone())?;
        rx.recv_async().await.map_err(|_| gone())?
    }

    /// The disk tier's counters, when there is one.
    pub fn disk_stats(&self) -> Option<DiskTierStats> {
        *self.disk_stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}
