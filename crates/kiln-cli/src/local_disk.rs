//! The KV disk tier for the local engine (`kiln generate`, `kiln chat`, `--kv-disk-dir`): a
//! prompt's blocks on disk are read back before it is added, and the blocks a reply cached are
//! written after it, on the calling thread (one user: nothing else waits meanwhile). So a
//! later run whose prompt starts the same (a long system prompt, a document asked about again,
//! a chat picked up) computes only what is new. The blocks the CPU tier drops during a reply
//! are written as they fall out of it.

use std::path::{Path, PathBuf};

use kiln_engine::Engine;
use kiln_engine::disk_tier::{DiskTier, DiskTierConfig, model_files_id};

pub struct LocalDisk {
    tier: DiskTier,
}

impl LocalDisk {
    /// Opens the folder for `engine` (whose CPU tier the blocks come back through).
    pub fn open(
        dir: PathBuf,
        max_bytes: u64,
        model_path: &Path,
        engine: &mut Engine,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            engine.runner_config().num_cpu_blocks > 0,
            "the KV disk tier brings blocks back through the CPU tier, which has no room"
        );
        let model_id = model_files_id(model_path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", model_path.display()))?;
        let cfg = DiskTierConfig {
            dir,
            max_bytes,
            model_id,
        };
        engine.enable_kv_events();
        engine.enable_spill();
        let tier = DiskTier::open(&cfg, engine)
            .map_err(|e| anyhow::anyhow!("KV disk tier at {}: {e}", cfg.dir.display()))?;
        Ok(Self { tier })
    }

    /// Before `prompt` is added: the blocks of it that only the disk holds go into the CPU
    /// tier. Returns how many.
    pub fn restore(&mut self, engine: &mut Engine, prompt: &[u32], salt: Option<&str>) -> usize {
        self.tier
            .restore(engine, prompt, salt)
            .unwrap_or_else(|e| warn("reading", e))
    }

    /// After each step: the blocks it cached are queued, those the CPU tier dropped written.
    pub fn after_step(&mut self, engine: &mut Engine) {
        self.tier.note(&engine.take_kv_events());
        let dropped = self.tier.spilled(engine.take_spilled());
        if let Err(e) = self.tier.files().write(&dropped) {
            warn::<()>("writing", e);
        }
    }

    /// After a reply: writes every block queued.
    pub fn save(&mut self, engine: &mut Engine) {
        self.after_step(engine);
        loop {
            let before = self.tier.pending();
            if before == 0 {
                return;
            }
            if let Err(e) = pollster::block_on(self.tier.save(engine, 64)) {
                return warn("writing", e);
            }
            if self.tier.pending() >= before {
                return; // what waits cannot be read now
            }
        }
    }
}

/// A disk error costs the cache, not the reply.
fn warn<T: Default>(what: &str, e: impl std::fmt::Display) -> T {
    eprintln!("warning: KV disk tier: {what} blocks failed: {e}");
    T::default()
}
