//! Prefill on one server, decode on another. The producer keeps a finished request's full
//! blocks (pinned: still counted as used, never evicted) until a decode server has fetched
//! them or their time is up; the consumer stores fetched blocks in its CPU tier under its own
//! prefix-cache keys, where the lookup of the request that follows finds them like any cold
//! block and restores them, so only the prompt's tail is prefilled there.
//!
//! Cost: pinning and unpinning are O(blocks); an import is O(blocks * BLOCK_SIZE).

use std::sync::Arc;

use kiln_core::{BLOCK_SIZE, NO_BLOCK};

use super::Scheduler;
use crate::kv_cache::Imported;
use crate::prefix_hash::{NewBlock, block_key};
use crate::request::RequestState;

/// A finished request's blocks held for transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedBlocks {
    /// GPU block ids of the first `blocks.len()` full blocks of the prompt.
    pub blocks: Vec<u32>,
    /// Each block's chained prefix-cache key.
    pub keys: Vec<u64>,
    /// The tokens the blocks hold, `BLOCK_SIZE` per block.
    pub tokens: Vec<u32>,
}

impl Scheduler {
    /// Ends a finished request: its blocks go back to the pool, except, for a request that
    /// asked for it, its full computed blocks, which stay pinned under its id. A request that
    /// gave blocks back behind a sliding window pins none (its prefix is incomplete).
    pub(super) fn release_or_pin(&mut self, id: u64, mut st: RequestState) {
        let full = if st.req.pin_blocks && st.num_released == 0 {
            (st.num_computed / BLOCK_SIZE).min(st.blocks.len())
        } else {
            0
        };
        self.kv.release(&st.blocks[full..]);
        if full > 0 {
            st.update_keys();
            self.pinned.insert(
                id,
                PinnedBlocks {
                    blocks: st.blocks[..full].to_vec(),
                    keys: st.keys[..full].to_vec(),
                    tokens: st.tokens[..full * BLOCK_SIZE].to_vec(),
                },
            );
        }
    }

    /// The blocks pinned for request `id`.
    pub fn pinned(&self, id: u64) -> Option<&PinnedBlocks> {
        self.pinned.get(&id)
    }

    /// Gives request `id`'s pinned blocks back to the pool (they stay in the prefix cache);
    /// false if none were pinned.
    pub fn unpin(&mut self, id: u64) -> bool {
        match self.pinned.remove(&id) {
            Some(p) => {
                self.kv.release(&p.blocks);
                true
            }
            None => false,
        }
    }

    /// Blocks held by pins.
    pub fn num_pinned_blocks(&self) -> usize {
        self.pinned.values().map(|p| p.blocks.len()).sum()
    }

    /// Stores blocks computed elsewhere in the CPU tier. `tokens` are the blocks' tokens
    /// (`BLOCK_SIZE` each) from the prompt's start, `keys` their keys as the sender computed
    /// them: a block whose key differs from this scheduler's own key of its tokens and
    /// `salt` is refused, and so is everything after it. Returns `(block index, CPU id)` for
    /// each block whose bytes the runner must now fill; blocks already cached here are
    /// skipped. At most the CPU tier's capacity is stored, so no import evicts itself.
    pub fn import_blocks(
        &mut self,
        tokens: &[u32],
        keys: &[u64],
        salt: Option<&str>,
    ) -> Vec<(usize, u32)> {
        let salt: Option<Arc<str>> = salt.map(Arc::from);
        let n = keys
            .len()
            .min(tokens.len() / BLOCK_SIZE)
            .min(self.kv.cpu_capacity());
        let (mut parent, mut parent_key) = (None, None);
        let mut stored = Vec::new();
        for (i, &claimed) in keys.iter().enumerate().take(n) {
            let t = &tokens[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
            let key = block_key(parent_key, t, salt.as_deref());
            if key != claimed {
                break;
            }
            let block = NewBlock {
                key,
                parent,
                parent_key,
                tokens: t,
                salt: salt.as_ref(),
            };
            match self.kv.import(block) {
                Imported::Cached(entry) => parent = Some(entry),
                Imported::Stored { entry, cpu } => {
                    parent = Some(entry);
                    stored.push((i, cpu));
                }
                Imported::Refused => break,
            }
            parent_key = Some(key);
        }
        self.stats.imported_blocks += stored.len() as u64;
        stored
    }

    /// Adds each pinned block's holder to `refs` (for the invariant check).
    pub(super) fn count_pins(&self, refs: &mut [u32]) {
        for b in self.pinned.values().flat_map(|p| &p.blocks) {
            debug_assert_ne!(*b, NO_BLOCK);
            refs[*b as usize] += 1;
        }
    }
}
