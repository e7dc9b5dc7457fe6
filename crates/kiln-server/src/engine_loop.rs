//! The engine layer: ONE std::thread owns the [`Engine`] and drives `step()` with
//! `pollster::block_on`. Handlers talk to it through a flume channel of [`Command`]s; each
//! request's updates go back on its own channel. The thread blocks on the command channel
//! when there is nothing to run. A request whose update receiver is gone (client disconnected)
//! is aborted before the next step, which frees its KV blocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kiln_engine::{Engine, Request, RequestUpdate, SchedulerStats};

/// Builds the engine on the engine thread (so the engine never has to be `Send`).
pub type EngineFactory = Box<dyn FnOnce() -> anyhow::Result<Engine> + Send>;

pub enum Command {
    Add { request: Request, updates: flume::Sender<SeqEvent> },
    Abort(u64),
}

#[derive(Debug)]
pub enum SeqEvent {
    Update(RequestUpdate),
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
}

/// The handlers' side of the engine thread.
pub struct EngineHandle {
    commands: flume::Sender<Command>,
    next_id: AtomicU64,
    /// Adds sent but not yet taken by the engine thread.
    pending: Arc<AtomicUsize>,
    stats: Arc<Mutex<SchedulerStats>>,
    pub info: EngineInfo,
}

impl EngineHandle {
    /// Starts the engine thread and waits until the engine is built.
    pub fn spawn(factory: EngineFactory) -> anyhow::Result<EngineHandle> {
        Self::spawn_with_kv_events(factory, None)
    }

    /// [`Self::spawn`], and when `kv_events` is set, the engine records KV-cache events and
    /// sends each step's batch there.
    pub fn spawn_with_kv_events(factory: EngineFactory, kv_events: Option<KvEventTx>) -> anyhow::Result<EngineHandle> {
        let (tx, rx) = flume::unbounded();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(Mutex::new(SchedulerStats::default()));
        let (p, s) = (pending.clone(), stats.clone());
        std::thread::Builder::new().name("kiln-engine".into()).spawn(move || {
            let mut engine = match factory() {
                Ok(e) => e,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let rc = engine.runner_config();
            let info = EngineInfo {
                adapter: engine.gpu().describe(),
                max_len: engine.max_len(),
                num_gpu_blocks: rc.num_blocks,
                num_cpu_blocks: rc.num_cpu_blocks,
                max_num_seqs: rc.max_seqs,
                max_num_batched_tokens: rc.max_tokens,
            };
            *s.lock().unwrap() = engine.stats();
            if kv_events.is_some() {
                engine.enable_kv_events();
            }
            let _ = ready_tx.send(Ok(info));
            run(engine, rx, p, s, kv_events);
        })?;
        let info = ready_rx.recv().map_err(|_| anyhow::anyhow!("the engine thread died while starting"))??;
        Ok(EngineHandle { commands: tx, next_id: AtomicU64::new(1), pending, stats, info })
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queues a request; its updates arrive on the returned channel.
    pub fn add(&self, request: Request) -> flume::Receiver<SeqEvent> {
        let (tx, rx) = flume::unbounded();
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.commands.send(Command::Add { request, updates: tx }).is_err() {
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
        *self.stats.lock().unwrap()
    }
}

/// Where the engine thread sends each step's KV-cache events.
pub type KvEventTx = flume::Sender<Vec<kiln_engine::KvEvent>>;

fn run(mut engine: Engine, rx: flume::Receiver<Command>, pending: Arc<AtomicUsize>, stats: Arc<Mutex<SchedulerStats>>, kv_events: Option<KvEventTx>) {
    let publish = |engine: &mut Engine| {
        if let Some(tx) = &kv_events {
            let events = engine.take_kv_events();
            if !events.is_empty() {
                let _ = tx.send(events);
            }
        }
    };
    let mut active: HashMap<u64, flume::Sender<SeqEvent>> = HashMap::new();
    let handle = |engine: &mut Engine, active: &mut HashMap<u64, flume::Sender<SeqEvent>>, cmd: Command| match cmd {
        Command::Add { request, updates } => {
            pending.fetch_sub(1, Ordering::SeqCst);
            let id = request.id;
            match engine.add_request(request) {
                Ok(()) => {
                    active.insert(id, updates);
                }
                Err(e) => {
                    let _ = updates.send(SeqEvent::Error(e.to_string()));
                }
            }
        }
        Command::Abort(id) => {
            if active.remove(&id).is_some() {
                engine.abort(id);
            }
        }
    };
    loop {
        publish(&mut engine);
        if active.is_empty() && !engine.has_unfinished() {
            *stats.lock().unwrap() = engine.stats();
            match rx.recv() {
                Ok(cmd) => handle(&mut engine, &mut active, cmd),
                Err(_) => return,
            }
        }
        while let Ok(cmd) = rx.try_recv() {
            handle(&mut engine, &mut active, cmd);
        }
        // Clients that went away: abort before spending a step on them.
        active.retain(|&id, tx| {
            let gone = tx.is_disconnected();
            if gone {
                engine.abort(id);
            }
            !gone
        });
        if !engine.has_unfinished() {
            continue;
        }
        match pollster::block_on(engine.step()) {
            Ok(updates) => {
                for u in updates {
                    let id = u.id;
                    let done = u.finished.is_some();
                    if let Some(tx) = active.get(&id) {
                        if tx.send(SeqEvent::Update(u)).is_err() && !done {
                            engine.abort(id);
                            active.remove(&id);
                        }
                    }
                    if done {
                        active.remove(&id);
                    }
                }
            }
            Err(e) => {
                tracing::error!("engine step failed: {e}");
                for (id, tx) in active.drain() {
                    engine.abort(id);
                    let _ = tx.send(SeqEvent::Error(format!("engine step failed: {e}")));
                }
            }
        }
        *stats.lock().unwrap() = engine.stats();
    }
}
