//! The engine layer: ONE std::thread owns the [`Engine`] and drives `step()` with
//! `pollster::block_on`. Handlers talk to it through a flume channel of [`Command`]s; each
//! request's updates go back on its own channel. The thread blocks on the command channel
//! when there is nothing to run. A request whose update receiver is gone (client disconnected)
//! is aborted before the next step, which frees its KV blocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kiln_engine::{Constraint, Engine, Request, RequestUpdate, SchedulerStats};

/// Builds the engine on the engine thread (so the engine never has to be `Send`).
pub type EngineFactory = Box<dyn FnOnce() -> anyhow::Result<Engine> + Send>;

pub enum Command {
    Add { request: Request, constraint: Option<Constraint>, updates: flume::Sender<SeqEvent> },
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
        let (tx, rx) = flume::unbounded();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(Mutex::new(SchedulerStats::default()));
        let (p, s) = (pending.clone(), stats.clone());
        std::thread::Builder::new().name("kiln-engine".into()).spawn(move || {
            let engine = match factory() {
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
            let _ = ready_tx.send(Ok(info));
            run(engine, rx, p, s);
        })?;
        let info = ready_rx.recv().map_err(|_| anyhow::anyhow!("the engine thread died while starting"))??;
        Ok(EngineHandle { commands: tx, next_id: AtomicU64::new(1), pending, stats, info })
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queues a request; its updates arrive on the returned channel.
    pub fn add(&self, request: Request) -> flume::Receiver<SeqEvent> {
        self.add_constrained(request, None)
    }

    /// [`Self::add`] with the matcher that constrains the output.
    pub fn add_constrained(&self, request: Request, constraint: Option<Constraint>) -> flume::Receiver<SeqEvent> {
        let (tx, rx) = flume::unbounded();
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.commands.send(Command::Add { request, constraint, updates: tx }).is_err() {
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

fn run(mut engine: Engine, rx: flume::Receiver<Command>, pending: Arc<AtomicUsize>, stats: Arc<Mutex<SchedulerStats>>) {
    let mut active: HashMap<u64, flume::Sender<SeqEvent>> = HashMap::new();
    let handle = |engine: &mut Engine, active: &mut HashMap<u64, flume::Sender<SeqEvent>>, cmd: Command| match cmd {
        Command::Add { request, constraint, updates } => {
            pending.fetch_sub(1, Ordering::SeqCst);
            let id = request.id;
            let added = match constraint {
                Some(c) => engine.add_constrained_request(request, c),
                None => engine.add_request(request),
            };
            match added {
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
                // Requests failed by their output constraint end with an error, not a finish.
                for (id, why) in engine.take_failures() {
                    if let Some(tx) = active.remove(&id) {
                        let _ = tx.send(SeqEvent::Error(why));
                    }
                }
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
