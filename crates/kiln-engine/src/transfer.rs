//! Prefill on one server, decode on another, as the engine sees it: the bytes of a finished
//! request's pinned blocks go out, blocks received from a prefill server come into the CPU
//! tier (the scheduler's `scheduler/transfer.rs` keeps the books).

use crate::{Engine, EngineError};

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
        let per_block = self.kv_layout().bytes_per_block() as usize;
        if data.len() != keys.len() * per_block
            || tokens.len() != keys.len() * kiln_core::BLOCK_SIZE
        {
            return Err(EngineError::Config(format!(
                "received {} blocks with {} tokens and {} bytes; this cache takes {} tokens and {per_block} bytes per block",
                keys.len(),
                tokens.len(),
                data.len(),
                kiln_core::BLOCK_SIZE
            )));
        }
        let (scheduler, runner) = self.parts();
        let stored = scheduler.import_blocks(tokens, keys, salt);
        for &(i, cpu) in &stored {
            runner
                .kv
                .fill_cpu(cpu, &data[i * per_block..(i + 1) * per_block])?;
        }
        Ok(stored.len())
    }
}
