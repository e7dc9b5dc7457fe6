//! The engine thread's side of the disk tier (`kiln_engine::disk_tier`): the blocks of the
//! requests about to be admitted are brought back from disk, read on a thread of their own
//! while steps run (admission held at each such request meanwhile; on the engine thread when
//! nothing runs), and imported when read, the engine thread woken by a command; cached blocks are read from the cache
//! between steps in batches once enough wait, and all of them while the engine idles
//! (between an agent's turns), a batch at a time so a new request is taken between batches;
//! blocks the CPU tier drops are written as they fall out of memory. The files are encoded
//! and written on another thread, so the steps never wait for the disk's writes (at most two
//! batches wait for it; then the engine thread does).

use std::sync::{Arc, Mutex};

use kiln_engine::disk_tier::{DiskFiles, DiskTier, DiskTierConfig, DiskTierStats, Loaded, ReadJob};
use kiln_engine::{Engine, KvEvent, SavedBlock};

use crate::engine_loop::Command;

/// Blocks read back and written per batch.
const BATCH: usize = 64;

/// What the writer thread is asked.
enum Job {
    Write(Vec<SavedBlock>),
    /// Answers once every batch sent before it is written.
    Flush(flume::Sender<()>),
}

type SharedStats = Arc<Mutex<Option<DiskTierStats>>>;

pub struct DiskLoop {
    config: Option<DiskTierConfig>,
    tier: Option<DiskTier>,
    /// To the writer thread of the open tier (it ends when this is dropped).
    jobs: Option<flume::Sender<Job>>,
    /// To the reader thread of the open tier (likewise).
    reads: Option<flume::Sender<ReadJob>>,
    /// The engine thread's commands, where the reader sends what it read
    /// ([`Command::DiskRead`]); weak, so the thread still ends with the last handle.
    wake: flume::WeakSender<Command>,
    stats: SharedStats,
}

impl DiskLoop {
    pub fn new(config: Option<DiskTierConfig>, wake: flume::WeakSender<Command>) -> Self {
        Self {
            config,
            tier: None,
            jobs: None,
            reads: None,
            wake,
            stats: Arc::default(),
        }
    }

    /// The counters the metrics read, updated as the tier works.
    pub fn stats(&self) -> SharedStats {
        self.stats.clone()
    }

    pub fn enabled(&self) -> bool {
        self.config.is_some()
    }

    /// Opens the tier's folder for a newly built engine (a rebuilt one may be another
    /// adapter's), turns the engine's KV events on and starts the writer thread.
    pub fn start(&mut self, engine: &mut Engine) -> anyhow::Result<()> {
        let Some(config) = &self.config else {
            return Ok(());
        };
        anyhow::ensure!(
            engine.runner_config().num_cpu_blocks > 0,
            "the KV disk tier brings blocks back through the CPU tier: give it host memory (--cpu-kv-bytes)"
        );
        engine.enable_kv_events();
        engine.enable_spill();
        let tier = DiskTier::open(config, engine)
            .map_err(|e| anyhow::anyhow!("KV disk tier at {}: {e}", config.dir.display()))?;
        tracing::info!(
            "KV disk tier: {} blocks ({} MiB) on disk in {}",
            tier.stats().blocks_resident,
            tier.stats().bytes_resident >> 20,
            tier.dir().display()
        );
        let (tx, rx) = flume::bounded(2);
        let (files, stats) = (tier.files(), self.stats.clone());
        std::thread::Builder::new()
            .name("kiln-kv-disk".into())
            .spawn(move || write_jobs(&rx, &files, &stats))?;
        let (read_tx, read_rx) = flume::unbounded();
        let (files, wake) = (tier.files(), self.wake.clone());
        std::thread::Builder::new()
            .name("kiln-kv-read".into())
            .spawn(move || read_jobs(&read_rx, &files, &wake))?;
        self.jobs = Some(tx);
        self.reads = Some(read_tx);
        self.tier = Some(tier);
        self.publish();
        Ok(())
    }

    /// The engine is gone: the blocks it had not read back are lost (those read are still
    /// written: the writer ends once it has written what it was sent), and so are the reads
    /// for its requests. The next engine opens the tier again ([`Self::start`]).
    pub fn stop(&mut self) {
        self.tier = None;
        self.jobs = None;
        self.reads = None;
    }

    fn publish(&self) {
        let stats = self.tier.as_ref().map(DiskTier::stats);
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = stats;
    }

    /// Before a step: sends the reader the jobs of the requests about to be admitted whose
    /// blocks only the disk holds, and imports the blocks read. With no request running
    /// there is no step for the reading to hold up, and the files are read here, so the
    /// request is admitted in this step rather than the next.
    pub fn before_step(&mut self, engine: &mut Engine) {
        let (Some(tier), Some(reads)) = (&mut self.tier, &self.reads) else {
            return;
        };
        let idle = engine.scheduler().running_ids().is_empty();
        for job in tier.plan_reads(engine) {
            // Read here also if the reader is gone, rather than hold the request for ever.
            let job = match idle {
                true => job,
                false => match reads.send(job) {
                    Ok(()) => continue,
                    Err(flume::SendError(job)) => job,
                },
            };
            tier.loaded(tier.files().read_job(job));
        }
        self.import(engine);
    }

    /// Takes blocks the reader read, and imports them if it can now.
    pub fn loaded(&mut self, engine: &mut Engine, loaded: Loaded) {
        if let Some(tier) = &mut self.tier {
            tier.loaded(loaded);
            self.import(engine);
        }
    }

    fn import(&mut self, engine: &mut Engine) {
        let Some(tier) = &mut self.tier else {
            return;
        };
        match tier.import_loaded(engine) {
            Ok(0) => {}
            Ok(n) => {
                tracing::debug!(blocks = n, "KV blocks read from disk");
                self.publish();
            }
            Err(e) => tracing::warn!("importing KV blocks read from disk failed: {e}"),
        }
    }

    /// Queues the blocks the step's events announce cached, and sends those the CPU tier
    /// dropped to the writer.
    pub fn note(&mut self, engine: &mut Engine, events: &[KvEvent]) {
        let (Some(t), Some(jobs)) = (&mut self.tier, &self.jobs) else {
            return;
        };
        let spilled = t.spilled(engine.take_spilled());
        if !spilled.is_empty() {
            let _ = jobs.send(Job::Write(spilled));
        }
        if !events.is_empty() {
            t.note(events);
            self.publish();
        }
    }

    /// Between steps: sends a batch to the writer once a whole one waits.
    pub fn after_step(&mut self, engine: &mut Engine) {
        if self.tier.as_ref().is_some_and(|t| t.pending() >= BATCH) {
            self.save(engine);
        }
    }

    /// While the engine idles (or the server shuts down, `busy` never true): sends what
    /// waits to the writer, a batch at a time, until `busy` says work arrived.
    pub fn when_idle(&mut self, engine: &mut Engine, busy: impl Fn() -> bool) {
        while self.tier.as_ref().is_some_and(|t| t.pending() > 0) && !busy() {
            if !self.save(engine) {
                break;
            }
        }
    }

    /// Sends everything waiting to the writer; `done` is answered once it is written.
    pub fn flush(&mut self, engine: &mut Engine, done: flume::Sender<()>) {
        self.when_idle(engine, || false);
        match &self.jobs {
            Some(jobs) => {
                let _ = jobs.send(Job::Flush(done));
            }
            None => {
                let _ = done.send(());
            }
        }
    }

    /// Lets the writer finish what it was sent, then forgets what waits to be written and
    /// removes every block file in the folder; returns how many (0 without a disk tier).
    pub fn clear(&mut self) -> Result<usize, String> {
        let Some(tier) = &mut self.tier else {
            return Ok(0);
        };
        if let Some(jobs) = &self.jobs {
            let (tx, rx) = flume::bounded(1);
            if jobs.send(Job::Flush(tx)).is_ok() {
                let _ = rx.recv();
            }
        }
        let removed = tier
            .clear()
            .map_err(|e| format!("{}: {e}", tier.dir().display()));
        self.publish();
        removed
    }

    /// Reads one batch back and sends it to the writer; false when that made no progress
    /// (what waits can only be read later) or failed (the queue is given up).
    fn save(&mut self, engine: &mut Engine) -> bool {
        let (Some(tier), Some(jobs)) = (&mut self.tier, &self.jobs) else {
            return false;
        };
        let before = tier.pending();
        let read = pollster::block_on(tier.read_batch(engine, BATCH));
        let after = tier.pending();
        let progress = match read {
            Ok(blocks) if blocks.is_empty() => after < before,
            Ok(blocks) => jobs.send(Job::Write(blocks)).is_ok(),
            Err(e) => {
                tracing::warn!(
                    "reading KV blocks back for the disk failed: {e}; the queue is dropped"
                );
                tier.forget_queue();
                false
            }
        };
        self.publish();
        progress
    }
}

/// The reader thread: reads each job's files and hands the blocks to the engine thread,
/// until the tier or the engine thread is gone.
fn read_jobs(
    jobs: &flume::Receiver<ReadJob>,
    files: &DiskFiles,
    wake: &flume::WeakSender<Command>,
) {
    for job in jobs.iter() {
        let loaded = files.read_job(job);
        let Some(engine) = wake.upgrade() else {
            return;
        };
        if engine.send(Command::DiskRead(loaded)).is_err() {
            return;
        }
    }
}

/// The writer thread: writes each batch, and after each updates the shared counters.
fn write_jobs(jobs: &flume::Receiver<Job>, writer: &DiskFiles, stats: &SharedStats) {
    for job in jobs.iter() {
        match job {
            Job::Write(blocks) => {
                if let Err(e) = writer.write(&blocks) {
                    tracing::warn!("writing KV blocks to disk failed: {e}");
                }
                if let Some(s) = stats.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    writer.fill(s);
                }
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
