//! The engine thread's loop: commands taken between steps, steps run and their updates sent
//! to each request's channel, the disk tier fed, failures contained, the engine rebuilt after
//! a lost device or a panic.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kiln_engine::{Engine, EngineError, SchedulerStats};

use kiln_model::LoraAdapter;

use super::{CacheReset, Command, EngineFactory, KvEventTx, LoraCommand, LoraRegistry, SeqEvent};
use crate::disk_tier::DiskLoop;
use crate::health::Health;
use crate::kv_transfer::pins::Pins;

/// The engine thread's state that outlives one engine.
pub(super) struct Loop {
    pub(super) rx: flume::Receiver<Command>,
    pub(super) active: HashMap<u64, flume::Sender<SeqEvent>>,
    pub(super) pending: Arc<AtomicUsize>,
    pub(super) stats: Arc<Mutex<SchedulerStats>>,
    pub(super) health: Arc<Health>,
    /// Where each step's KV-cache events go, when they are published.
    pub(super) kv_events: Option<KvEventTx>,
    /// When the blocks pinned for a decode server expire.
    pub(super) pins: Pins,
    /// Cached blocks kept on disk, when configured.
    pub(super) disk: DiskLoop,
    /// The engine's LoRA adapters as the handlers see them.
    pub(super) lora: LoraRegistry,
    /// Adapters loaded through the API, loaded again into a rebuilt engine.
    pub(super) loaded_lora: Vec<Arc<LoraAdapter>>,
    /// Sleep after this long without requests.
    pub(super) sleep_after_idle: Option<Duration>,
    /// A `Sleep` command taken while idle, answered once the engine is dropped.
    pub(super) sleep_asked: Option<flume::Sender<Result<(), String>>>,
    /// The command that woke a sleeping engine, handled first by the next `run`.
    pub(super) next: Option<Command>,
}

/// Why [`Loop::run`] returned.
pub(super) enum Stop {
    /// Every handle is gone.
    Exit,
    /// The engine cannot go on (a lost device, an unexpected error).
    Failed(String),
    /// Asked to sleep, or idle for `sleep_after_idle`: nothing runs or waits.
    Sleep,
}

impl Loop {
    fn handle(&mut self, engine: &mut Engine, cmd: Command) {
        match cmd {
            Command::Add {
                request,
                constraint,
                updates,
            } => {
                self.pending.fetch_sub(1, Ordering::SeqCst);
                let id = request.id;
                let added = match constraint {
                    Some(c) => engine.add_constrained_request(request, *c),
                    None => engine.add_request(request),
                };
                match added {
                    Ok(()) => {
                        self.active.insert(id, updates);
                    }
                    Err(e) => {
                        let _ = updates.send(SeqEvent::Rejected(e.to_string()));
                    }
                }
            }
            Command::Abort(id) => {
                if self.active.remove(&id).is_some() {
                    engine.abort(id);
                }
            }
            Command::Transfer(t) => self.pins.handle(engine, t),
            Command::FlushDisk(done) => {
                self.publish(engine);
                self.disk.flush(engine, done);
            }
            Command::DiskRead(loaded) => self.disk.loaded(engine, loaded),
            Command::ResetPrefixCache(done) => {
                // What waits for the disk goes to the writer first, so the clearing removes it.
                self.publish(engine);
                let (gpu_blocks, cpu_blocks) = engine.reset_prefix_cache();
                let reset = self.disk.clear().map(|disk_blocks| CacheReset {
                    gpu_blocks,
                    cpu_blocks,
                    disk_blocks,
                });
                self.publish(engine);
                let _ = done.send(reset);
            }
            Command::Lora(LoraCommand::Load(adapter, done)) => {
                let loaded = engine.load_lora(adapter.clone());
                self.loaded(engine, adapter, loaded, done);
            }
            Command::Lora(LoraCommand::Replace(adapter, done)) => {
                let loaded = engine.replace_lora(adapter.clone());
                self.loaded(engine, adapter, loaded, done);
            }
            Command::Sleep(done) => {
                let busy = self.active.len();
                if busy > 0 || engine.has_unfinished() {
                    let _ = done.send(Err(format!(
                        "{busy} requests are running or waiting; the engine sleeps when none is"
                    )));
                } else if !self.pins.is_empty() {
                    let _ = done.send(Err(
                        "blocks are pinned for a decode server to fetch; the engine sleeps once \
                         they are fetched or expire"
                            .into(),
                    ));
                } else {
                    self.sleep_asked = Some(done);
                }
            }
            Command::WakeUp(done) => {
                let _ = done.send(Ok(()));
            }
            Command::SleepAfterIdle(idle) => self.sleep_after_idle = idle,
            Command::Lora(LoraCommand::Unload(name, done)) => {
                let unloaded = engine.unload_lora(&name);
                if unloaded.is_ok() {
                    tracing::info!("LoRA adapter `{name}` unloaded");
                    self.loaded_lora.retain(|a| a.name != name);
                }
                self.lora.refresh(engine);
                let _ = done.send(unloaded.map_err(|e| e.to_string()));
            }
        }
    }

    /// After `adapter` was loaded (or put in the place of the one of its name): kept to be
    /// loaded again into a rebuilt engine, the handlers' registry refreshed, the answer sent.
    fn loaded(
        &mut self,
        engine: &Engine,
        adapter: Arc<LoraAdapter>,
        loaded: Result<u32, kiln_engine::EngineError>,
        done: flume::Sender<Result<u32, String>>,
    ) {
        if loaded.is_ok() {
            tracing::info!(
                "LoRA adapter `{}` loaded from {}",
                adapter.name,
                adapter.path.display()
            );
            self.loaded_lora.retain(|a| a.name != adapter.name);
            self.loaded_lora.push(adapter);
        }
        self.lora.refresh(engine);
        let _ = done.send(loaded.map_err(|e| e.to_string()));
    }

    /// Sets up a freshly built engine: KV events on when they are published, the disk
    /// tier's folder, stats.
    pub(super) fn start(&mut self, engine: &mut Engine) -> anyhow::Result<()> {
        if self.kv_events.is_some() {
            engine.enable_kv_events();
        }
        self.lora.refresh(engine);
        self.disk.start(engine)?;
        self.publish(engine);
        Ok(())
    }

    /// Publishes the scheduler's counters and the KV-cache events since the last call (to
    /// their subscribers and the disk tier).
    pub(super) fn publish(&mut self, engine: &mut Engine) {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = engine.stats();
        self.lora.note_requests(engine);
        if self.kv_events.is_none() && !self.disk.enabled() {
            return;
        }
        let events = engine.take_kv_events();
        self.disk.note(engine, &events);
        if let Some(tx) = &self.kv_events
            && !events.is_empty()
        {
            let _ = tx.send(events);
        }
    }

    /// Steps `engine` until every handle is gone, the engine cannot go on, or it is to sleep.
    pub(super) fn run(&mut self, engine: &mut Engine) -> Stop {
        if let Some(cmd) = self.next.take() {
            self.handle(engine, cmd);
        }
        loop {
            if self.active.is_empty() && !engine.has_unfinished() {
                self.publish(engine);
                let rx = &self.rx;
                self.disk.when_idle(engine, || !rx.is_empty());
                // Idle: sleep when the time is up, unless blocks wait to be fetched.
                let idle = (self.sleep_after_idle)
                    .filter(|_| self.pins.is_empty())
                    .map(|d| Instant::now() + d);
                let cmd = match self.pins.next_deadline().into_iter().chain(idle).min() {
                    Some(d) => self
                        .rx
                        .recv_deadline(d)
                        .map_err(|e| e == flume::RecvTimeoutError::Disconnected),
                    None => self.rx.recv().map_err(|_| true),
                };
                match cmd {
                    Ok(cmd) => self.handle(engine, cmd),
                    Err(true) => return Stop::Exit,
                    Err(false) if idle.is_some_and(|d| Instant::now() >= d) => {
                        tracing::info!("idle for {:?}", self.sleep_after_idle.unwrap_or_default());
                        return Stop::Sleep;
                    }
                    Err(false) => {} // a pin's time is up
                }
            }
            self.pins.expire(engine);
            while let Ok(cmd) = self.rx.try_recv() {
                self.handle(engine, cmd);
            }
            if self.sleep_asked.is_some() {
                return Stop::Sleep;
            }
            // Clients that went away: abort before spending a step on them.
            self.active.retain(|&id, tx| {
                let gone = tx.is_disconnected();
                if gone {
                    engine.abort(id);
                }
                !gone
            });
            if !engine.has_unfinished() {
                continue;
            }
            self.disk.before_step(engine);
            let steps = engine.num_steps();
            let resolves = engine.step_in_flight();
            match pollster::block_on(engine.step()) {
                // Nothing could be admitted (pinned blocks fill the pool): wait for a
                // command or a pin's expiry instead of spinning.
                Ok(_) if !resolves && engine.num_steps() == steps => {
                    let wait = self
                        .pins
                        .next_deadline()
                        .unwrap_or_else(|| std::time::Instant::now() + Duration::from_millis(50));
                    if let Ok(cmd) = self.rx.recv_deadline(wait) {
                        self.handle(engine, cmd);
                    }
                }
                Ok(updates) => {
                    // Requests failed by their output constraint end with an error, not a finish.
                    for (id, why) in engine.take_failures() {
                        if let Some(tx) = self.active.remove(&id) {
                            let _ = tx.send(SeqEvent::Error(why));
                        }
                    }
                    for u in updates {
                        let id = u.id;
                        let done = u.finished.is_some();
                        if let Some(tx) = self.active.get(&id)
                            && tx.send(SeqEvent::Update(u)).is_err()
                            && !done
                        {
                            engine.abort(id);
                            self.active.remove(&id);
                        }
                        if done {
                            self.active.remove(&id);
                            self.pins.finished(engine, id);
                        }
                    }
                }
                Err(EngineError::StepFailed { failed, reason }) => {
                    tracing::error!(
                        "step failed ({} requests failed, the others go on): {reason}",
                        failed.len()
                    );
                    self.health.failed_steps.fetch_add(1, Ordering::Relaxed);
                    for id in failed {
                        if let Some(tx) = self.active.remove(&id) {
                            let _ = tx.send(SeqEvent::Error(format!(
                                "the engine failed while running this request: {reason}"
                            )));
                        }
                    }
                }
                Err(EngineError::DeviceLost { reason, .. }) => {
                    self.health.failed_steps.fetch_add(1, Ordering::Relaxed);
                    return Stop::Failed(format!("the GPU device was lost ({reason})"));
                }
                Err(e) => {
                    // Not expected from `step`; fail everything rather than guess.
                    self.health.failed_steps.fetch_add(1, Ordering::Relaxed);
                    return Stop::Failed(format!("the engine failed: {e}"));
                }
            }
            self.publish(engine);
            self.disk.after_step(engine);
        }
    }

    /// Fails every request in flight with `reason`, drops `engine` and builds a new one,
    /// retrying (with a growing pause) until it succeeds. The server is down meanwhile.
    pub(super) fn restart(
        &mut self,
        engine: Engine,
        factory: &EngineFactory,
        reason: &str,
    ) -> Engine {
        tracing::error!(
            "{reason}; failing {} requests and rebuilding the engine",
            self.active.len()
        );
        self.health
            .set_down(format!("{reason}; the engine is restarting"));
        for (_, tx) in self.active.drain() {
            let _ = tx.send(SeqEvent::Error(format!(
                "{reason}; this request was lost, retry it"
            )));
        }
        // Adds queued while the engine was failing: refuse them the same way.
        while let Ok(cmd) = self.rx.try_recv() {
            if let Command::Add { updates, .. } = cmd {
                self.pending.fetch_sub(1, Ordering::SeqCst);
                let _ = updates.send(SeqEvent::Error(format!("{reason}; retry the request")));
            }
        }
        self.pins.clear();
        self.disk.stop();
        drop(engine);
        let engine = self.build(factory, reason);
        self.health.engine_restarts.fetch_add(1, Ordering::Relaxed);
        tracing::info!("the engine is rebuilt and serving again");
        engine
    }

    /// Builds an engine with `factory` (`why`: what it is for, in errors), retrying with a
    /// growing pause until it succeeds, the server down meanwhile; sets it up, with the
    /// adapters loaded through the API in it, and marks the server up.
    pub(super) fn build(&mut self, factory: &EngineFactory, why: &str) -> Engine {
        let mut pause = Duration::from_millis(100);
        loop {
            match catch_unwind(AssertUnwindSafe(factory)) {
                Ok(Ok(mut engine)) => {
                    if let Err(e) = self.start(&mut engine) {
                        tracing::error!("the engine goes on without it: {e:#}");
                    }
                    // The adapters loaded through the API, under the ids they get now.
                    for a in &self.loaded_lora {
                        if let Err(e) = engine.load_lora(a.clone()) {
                            tracing::error!("LoRA adapter `{}` not loaded again: {e}", a.name);
                        }
                    }
                    self.lora.refresh(&engine);
                    self.health.set_up();
                    return engine;
                }
                Ok(Err(e)) => {
                    tracing::error!("building the engine failed: {e:#}");
                    self.health
                        .set_down(format!("{why}; building the engine failed: {e:#}"));
                }
                Err(_) => self
                    .health
                    .set_down(format!("{why}; building the engine panicked")),
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(10));
        }
    }
}
