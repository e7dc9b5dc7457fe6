//! The engine layer: ONE std::thread owns the [`Engine`] and drives `step()` with
//! `pollster::block_on`. Handlers talk to it through a flume channel of [`Command`]s; each
//! request's updates go back on its own channel. The thread blocks on the command channel
//! when there is nothing to run. A request whose update receiver is gone (client disconnected)
//! is aborted before the next step, which frees its KV blocks.
//!
//! The thread supervises the engine: a failed step fails only that step's requests (each gets
//! a clear error) and the loop goes on; a lost device or a panic fails every request in flight,
//! marks the server down (`/health` 503 with the reason) and rebuilds the engine with the
//! factory, after which the server is up again.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kiln_engine::disk_tier::{DiskTierConfig, DiskTierStats};
use kiln_engine::{Constraint, Engine, EngineError, Request, RequestUpdate, SchedulerStats};

use crate::disk_tier::DiskLoop;
use crate::health::Health;
use crate::kv_transfer::pins::{Pins, TransferCommand};

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
    }
}

/// The engine thread's state that outlives one engine.
struct Loop {
    rx: flume::Receiver<Command>,
    active: HashMap<u64, flume::Sender<SeqEvent>>,
    pending: Arc<AtomicUsize>,
    stats: Arc<Mutex<SchedulerStats>>,
    health: Arc<Health>,
    /// Where each step's KV-cache events go, when they are published.
    kv_events: Option<KvEventTx>,
    /// When the blocks pinned for a decode server expire.
    pins: Pins,
    /// Cached blocks kept on disk, when configured.
    disk: DiskLoop,
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
        let mut lp = Loop {
            rx,
            active: HashMap::new(),
            pending: pending.clone(),
            stats: stats.clone(),
            health: health.clone(),
            kv_events,
            pins: Pins::default(),
            disk: DiskLoop::new(kv_disk),
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
                        Ok(None) => return, // every handle is gone
                        Ok(Some(reason)) => reason,
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

    /// The disk tier's counters, when there is one.
    pub fn disk_stats(&self) -> Option<DiskTierStats> {
        *self.disk_stats.lock().unwrap_or_else(|e| e.into_inner())
    }
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
        }
    }

    /// Sets up a freshly built engine: KV events on when they are published, the disk
    /// tier's folder, stats.
    fn start(&mut self, engine: &mut Engine) -> anyhow::Result<()> {
        if self.kv_events.is_some() {
            engine.enable_kv_events();
        }
        self.disk.start(engine)?;
        self.publish(engine);
        Ok(())
    }

    /// Publishes the scheduler's counters and the KV-cache events since the last call (to
    /// their subscribers and the disk tier).
    fn publish(&mut self, engine: &mut Engine) {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = engine.stats();
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

    /// Steps `engine` until every handle is gone (`None`) or the engine cannot go on
    /// (`Some(reason)`: the device was lost).
    fn run(&mut self, engine: &mut Engine) -> Option<String> {
        loop {
            if self.active.is_empty() && !engine.has_unfinished() {
                self.publish(engine);
                let rx = &self.rx;
                self.disk.when_idle(engine, || !rx.is_empty());
                let cmd = match self.pins.next_deadline() {
                    Some(d) => self
                        .rx
                        .recv_deadline(d)
                        .map_err(|e| e == flume::RecvTimeoutError::Disconnected),
                    None => self.rx.recv().map_err(|_| true),
                };
                match cmd {
                    Ok(cmd) => self.handle(engine, cmd),
                    Err(true) => return None,
                    Err(false) => {} // a pin's time is up
                }
            }
            self.pins.expire(engine);
            while let Ok(cmd) = self.rx.try_recv() {
                self.handle(engine, cmd);
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
                    return Some(format!("the GPU device was lost ({reason})"));
                }
                Err(e) => {
                    // Not expected from `step`; fail everything rather than guess.
                    self.health.failed_steps.fetch_add(1, Ordering::Relaxed);
                    return Some(format!("the engine failed: {e}"));
                }
            }
            self.publish(engine);
            self.disk.after_step(engine);
        }
    }

    /// Fails every request in flight with `reason`, drops `engine` and builds a new one,
    /// retrying (with a growing pause) until it succeeds. The server is down meanwhile.
    fn restart(&mut self, engine: Engine, factory: &EngineFactory, reason: &str) -> Engine {
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
        let mut pause = Duration::from_millis(100);
        loop {
            match catch_unwind(AssertUnwindSafe(factory)) {
                Ok(Ok(mut engine)) => {
                    self.health.engine_restarts.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = self.start(&mut engine) {
                        tracing::error!("the rebuilt engine goes on without it: {e:#}");
                    }
                    self.health.set_up();
                    tracing::info!("the engine is rebuilt and serving again");
                    return engine;
                }
                Ok(Err(e)) => {
                    tracing::error!("rebuilding the engine failed: {e:#}");
                    self.health
                        .set_down(format!("{reason}; rebuilding the engine failed: {e:#}"));
                }
                Err(_) => self
                    .health
                    .set_down(format!("{reason}; rebuilding the engine panicked")),
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(10));
        }
    }
}
