//! The engine thread's side of the disk tier (`kiln_engine::disk_tier`): a request's blocks
//! are brought back from disk as it is added; cached blocks are saved between steps in
//! batches once enough wait, and all of them while the engine idles (between an agent's
//! turns), a batch at a time so a new request is taken between batches.

use std::sync::{Arc, Mutex};

use kiln_engine::disk_tier::{DiskTier, DiskTierConfig, DiskTierStats};
use kiln_engine::{Engine, KvEvent, Request};

/// Blocks read back and written per save.
const BATCH: usize = 64;

pub struct DiskLoop {
    config: Option<DiskTierConfig>,
    tier: Option<DiskTier>,
    stats: Arc<Mutex<Option<DiskTierStats>>>,
}

impl DiskLoop {
    pub fn new(config: Option<DiskTierConfig>) -> Self {
        Self {
            config,
            tier: None,
            stats: Arc::default(),
        }
    }

    /// The counters the metrics read, updated as the tier works.
    pub fn stats(&self) -> Arc<Mutex<Option<DiskTierStats>>> {
        self.stats.clone()
    }

    pub fn enabled(&self) -> bool {
        self.config.is_some()
    }

    /// Opens the tier's folder for a newly built engine (a rebuilt one may be another
    /// adapter's) and turns the engine's KV events on.
    pub fn start(&mut self, engine: &mut Engine) -> anyhow::Result<()> {
        let Some(config) = &self.config else {
            return Ok(());
        };
        anyhow::ensure!(
            engine.runner_config().num_cpu_blocks > 0,
            "the KV disk tier brings blocks back through the CPU tier: give it host memory (--cpu-kv-bytes)"
        );
        engine.enable_kv_events();
        let tier = DiskTier::open(config, engine)
            .map_err(|e| anyhow::anyhow!("KV disk tier at {}: {e}", config.dir.display()))?;
        tracing::info!(
            "KV disk tier: {} blocks ({} MiB) on disk in {}",
            tier.stats().blocks_resident,
            tier.stats().bytes_resident >> 20,
            tier.dir().display()
        );
        self.tier = Some(tier);
        self.publish();
        Ok(())
    }

    /// The engine is gone: the blocks it had not saved are lost.
    pub fn stop(&mut self) {
        if let Some(t) = &mut self.tier {
            t.forget_queue();
        }
    }

    fn publish(&self) {
        let stats = self.tier.as_ref().map(DiskTier::stats);
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = stats;
    }

    /// Brings `request`'s blocks that only the disk holds into the CPU tier.
    pub fn restore(&mut self, engine: &mut Engine, request: &Request) {
        let Some(tier) = &mut self.tier else {
            return;
        };
        let salt = request.cache_salt.as_deref();
        match tier.restore(engine, &request.prompt, salt) {
            Ok(0) => {}
            Ok(n) => {
                tracing::debug!(id = request.id, blocks = n, "KV blocks read from disk");
                self.publish();
            }
            Err(e) => tracing::warn!("reading KV blocks from disk failed: {e}"),
        }
    }

    /// Queues the blocks the step's events announce cached.
    pub fn note(&mut self, events: &[KvEvent]) {
        if let Some(t) = &mut self.tier
            && !events.is_empty()
        {
            t.note(events);
            self.publish();
        }
    }

    /// Between steps: saves a batch once a whole one waits.
    pub fn after_step(&mut self, engine: &mut Engine) {
        if self
            .tier
            .as_ref()
            .is_some_and(|t| t.stats().pending >= BATCH)
        {
            self.save(engine);
        }
    }

    /// While the engine idles (or the server shuts down, `busy` never true): saves what
    /// waits, a batch at a time, until `busy` says work arrived.
    pub fn when_idle(&mut self, engine: &mut Engine, busy: impl Fn() -> bool) {
        while self.tier.as_ref().is_some_and(|t| t.stats().pending > 0) && !busy() {
            if !self.save(engine) {
                break;
            }
        }
    }

    /// Saves one batch; false when it made no progress (what waits can only be read later)
    /// or failed (the queue is given up).
    fn save(&mut self, engine: &mut Engine) -> bool {
        let Some(tier) = &mut self.tier else {
            return false;
        };
        let before = tier.stats().pending;
        let saved = pollster::block_on(tier.save(engine, BATCH));
        let after = tier.stats().pending;
        self.publish();
        match saved {
            Ok(n) => n > 0 || after < before,
            Err(e) => {
                tracing::warn!("writing KV blocks to disk failed: {e}; the queue is dropped");
                self.stop();
                false
            }
        }
    }
}
