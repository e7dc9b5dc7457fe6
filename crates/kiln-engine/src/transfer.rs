//! Blocks that leave or enter the engine's cache, as bytes: a finished request's pinned
//! blocks go out to a decode server, blocks received from a prefill server come into the CPU
//! tier, and cached blocks are read by key for the disk tier, which brings them back the same
//! way (the scheduler's `scheduler/transfer.rs` keeps the books).

use kiln_core::BLOCK_SIZE;
use kiln_scheduler::{BlockPlace, WaitingHead};

use crate::{Engine, EngineError};

/// A cached block's bytes, read by key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedBlock {
    pub key: u64,
    /// The key of the block before it (`None` at a prompt's start).
    pub parent: Option<u64>,
    pub tokens: [u32; BLOCK_SIZE],
    /// `layout.bytes_per_block()` bytes, laid out as in [`ExportedBlocks`].
    pub data: Vec<u8>,
}

/// A finished request's pinned blocks, read back from the GPU.
#[derive(Clone, Debug)]
pub struct ExportedBlocks {
    /// The GPU block ids they were read from.
    pub block_ids: Vec<u32>,
    /// Each block's chained prefix-cache key.
    pub keys: Vec<u64>,
    /// The tokens the blocks hold, `BLOCK_SIZE` per block.
    pub tokens: Vec<u32>,
    /// `layout.bytes_per_block()` bytes per block, in block order (each: every layer's K
    /// slots, then every layer's V slots).
    pub data: Vec<u8>,
}

impl Engine {
    /// Reads the blocks pinned for request `id` and unpins them (they stay cached); `None`
    /// if none are pinned (never, already fetched or expired).
    pub async fn export_pinned(&mut self, id: u64) -> Result<Option<ExportedBlocks>, EngineError> {
        let (scheduler, runner) = self.parts();
        let Some(pin) = scheduler.pinned(id).cloned() else {
            return Ok(None);
        };
        let data = runner.kv.read_blocks(runner.context(), &pin.blocks).await;
        scheduler.unpin(id);
        Ok(Some(ExportedBlocks {
            block_ids: pin.blocks,
            keys: pin.keys,
            tokens: pin.tokens,
            data: data?,
        }))
    }

    /// Gives request `id`'s pinned blocks back to the pool; false if none were pinned.
    pub fn unpin(&mut self, id: u64) -> bool {
        self.parts().0.unpin(id)
    }

    /// Stores blocks computed by another server (`keys`, `tokens` and `data` as in
    /// [`ExportedBlocks`]) in the CPU tier, where the prefix lookup of a later request finds
    /// them. Blocks whose key differs from this engine's own key of their tokens under
    /// `salt` are refused with everything after them, and blocks cached here already are
    /// skipped. Returns how many were stored.
    pub fn import_blocks(
        &mut self,
        keys: &[u64],
        tokens: &[u32],
        salt: Option<&str>,
        data: &[u8],
    ) -> Result<usize, EngineError> {
        self.import_blocks_after(0, keys, tokens, salt, data)
    }

    /// [`Self::import_blocks`] for a chain whose first `cached` blocks are cached here
    /// already: `data` holds the bytes of the blocks after them only (the chain stops at the
    /// first of those `cached` blocks that is not cached). Nothing is imported (0) while a
    /// step in flight moves blocks to the CPU tier: its copies land in CPU ids an import
    /// could take; try again after [`Self::step`].
    pub fn import_blocks_after(
        &mut self,
        cached: usize,
        keys: &[u64],
        tokens: &[u32],
        salt: Option<&str>,
        data: &[u8],
    ) -> Result<usize, EngineError> {
        let per_block = self.kv_layout().bytes_per_block() as usize;
        let sent = keys.len().saturating_sub(cached);
        if data.len() != sent * per_block || tokens.len() != keys.len() * BLOCK_SIZE {
            return Err(EngineError::Config(format!(
                "received {} blocks with {} tokens and {} bytes for {sent} of them; this cache takes {BLOCK_SIZE} tokens and {per_block} bytes per block",
                keys.len(),
                tokens.len(),
                data.len(),
            )));
        }
        if !self.can_import() {
            return Ok(0);
        }
        let stored = self.scheduler.import_blocks(tokens, keys, salt, cached);
        self.keep_spilled();
        let runner = &mut self.runner;
        for &(i, cpu) in &stored {
            let at = (i - cached) * per_block;
            runner.kv.fill_cpu(cpu, &data[at..at + per_block])?;
        }
        Ok(stored.len())
    }

    /// The first `n` waiting requests, in the order they will be admitted, with their prefix
    /// keys and how many of their blocks are cached ([`kiln_scheduler::Scheduler::waiting_heads`]).
    pub fn waiting_heads(&mut self, n: usize) -> Vec<WaitingHead<'_>> {
        self.scheduler.waiting_heads(n)
    }

    /// Keeps waiting request `id` (and those behind it) from being admitted while blocks of
    /// its prompt are on their way into the cache (read from disk); running requests go on.
    /// False if it is not waiting.
    pub fn hold_request(&mut self, id: u64) -> bool {
        self.scheduler.hold(id)
    }

    /// Lets a request held by [`Self::hold_request`] be admitted.
    pub fn release_request(&mut self, id: u64) {
        self.scheduler.release(id)
    }

    /// Keeps the blocks the CPU tier drops to make room, with their bytes, for a tier below it
    /// ([`Self::take_spilled`]).
    pub fn enable_spill(&mut self) {
        self.scheduler.enable_spill();
        self.spilled.get_or_insert_with(Vec::new);
    }

    /// The blocks the CPU tier dropped since the last call, with their bytes.
    pub fn take_spilled(&mut self) -> Vec<SavedBlock> {
        self.spilled
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Copies out the bytes of the blocks the scheduler just dropped from the CPU tier, before
    /// the step (or import) that dropped them overwrites them.
    pub(crate) fn keep_spilled(&mut self) {
        let Some(kept) = &mut self.spilled else {
            return;
        };
        for s in self.scheduler.take_spilled() {
            if let Some(data) = self.runner.kv.cpu_block(s.cpu) {
                kept.push(SavedBlock {
                    key: s.key,
                    parent: s.parent,
                    tokens: s.tokens,
                    data: data.to_vec(),
                });
            }
        }
    }

    /// Whether blocks can be imported now: not while a step in flight moves blocks to the CPU
    /// tier.
    pub fn can_import(&self) -> bool {
        !self.in_flight.as_ref().is_some_and(|l| l.moves_to_cpu())
    }

    /// Reads the cached blocks under `keys`. Returns the blocks read and the keys still
    /// cached but not readable now: a block in the CPU tier while a step is in flight (that
    /// step's moves to the CPU tier land when it ends). Keys no longer cached are dropped.
    /// GPU blocks are read after the work already submitted, which wrote them.
    pub async fn read_cached(
        &mut self,
        keys: &[u64],
    ) -> Result<(Vec<SavedBlock>, Vec<u64>), EngineError> {
        let in_flight = self.step_in_flight();
        let (scheduler, runner) = self.parts();
        let (mut saved, mut later, mut gpu) = (Vec::new(), Vec::new(), Vec::new());
        for &key in keys {
            let Some(b) = scheduler.cached_block(key) else {
                continue;
            };
            let block = |data| SavedBlock {
                key,
                parent: b.parent,
                tokens: b.tokens,
                data,
            };
            match b.place {
                BlockPlace::Gpu(g) => {
                    gpu.push(g);
                    saved.push(block(Vec::new()));
                }
                BlockPlace::Cpu(c) => match runner.kv.cpu_block(c) {
                    Some(data) if !in_flight => saved.push(block(data.to_vec())),
                    _ => later.push(key),
                },
            }
        }
        let ctx = runner.context();
        let data = runner.kv.read_blocks(ctx, &gpu).await?;
        let per_block = runner.kv.bytes_per_block() as usize;
        let mut chunks = data.chunks_exact(per_block);
        for s in saved.iter_mut().filter(|s| s.data.is_empty()) {
            s.data = chunks.next().expect("one chunk per GPU block").to_vec();
        }
        Ok((saved, later))
    }
}
