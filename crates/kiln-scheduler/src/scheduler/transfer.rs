//! Blocks that leave or enter this scheduler's cache: prefill on one server and decode on
//! another, and the disk tier below the CPU tier (which reads cached blocks by key and brings
//! them back by import). The producer keeps a finished request's full
//! blocks (pinned: still counted as used, never evicted) until a decode server has fetched
//! them or their time is up; the consumer stores fetched blocks in its CPU tier under its own
//! prefix-cache keys, where the lookup of the request that follows finds them like any cold
//! block and restores them, so only the prompt's tail is prefilled there.
//!
//! Cost: pinning and unpinning are O(blocks); an import is O(blocks * BLOCK_SIZE).

use std::sync::Arc;

use kiln_core::{BLOCK_SIZE, NO_BLOCK};

use super::Scheduler;
use crate::kv_cache::{Imported, Spilled};
use crate::prefix_hash::{Loc, NewBlock, block_key};
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

/// Where a cached block's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockPlace {
    /// This GPU block.
    Gpu(u32),
    /// This CPU-tier id (its bytes land there at the end of the step that moved it).
    Cpu(u32),
}

/// A cached block, as [`Scheduler::cached_block`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedBlock {
    /// The key of the block before it (`None` at a prompt's start).
    pub parent: Option<u64>,
    pub tokens: [u32; BLOCK_SIZE],
    pub place: BlockPlace,
}

/// A waiting request, as [`Scheduler::waiting_heads`] reports it.
#[derive(Clone, Copy, Debug)]
pub struct WaitingHead<'a> {
    pub id: u64,
    /// Its known tokens (a preempted request's output included).
    pub tokens: &'a [u32],
    pub salt: Option<&'a str>,
    /// The prefix keys of its full blocks.
    pub keys: &'a [u64],
    /// How many of those blocks are cached, on the GPU or in the CPU tier.
    pub cached_blocks: usize,
}

/// The prefix-cache keys of the full blocks of `tokens` under `salt`, as the scheduler
/// computes them.
pub fn prefix_keys(tokens: &[u32], salt: Option<&str>) -> Vec<u64> {
    let mut keys: Vec<u64> = Vec::with_capacity(tokens.len() / BLOCK_SIZE);
    for t in tokens.chunks_exact(BLOCK_SIZE) {
        keys.push(block_key(keys.last().copied(), t, salt));
    }
    keys
}

impl Scheduler {
    /// How many leading full blocks of `tokens` under `salt` (whose keys are `keys`, from
    /// [`prefix_keys`]) are cached, on the GPU or in the CPU tier, and would be found by a
    /// request's lookup.
    pub fn cached_prefix_blocks(&self, keys: &[u64], tokens: &[u32], salt: Option<&str>) -> usize {
        self.kv.lookup(keys, tokens, salt, keys.len()).len()
    }

    /// The cached block under `key`, if there is one and its bytes are in place.
    pub fn cached_block(&self, key: u64) -> Option<CachedBlock> {
        let e = self.kv.entry(key)?;
        let place = match e.loc {
            Loc::Gpu(b) => BlockPlace::Gpu(b),
            Loc::Cpu(c) => BlockPlace::Cpu(c),
            Loc::Moving => return None,
        };
        Some(CachedBlock {
            parent: e.parent_key,
            tokens: e.tokens,
            place,
        })
    }

    /// The first `n` waiting requests, in the order they will be admitted, with the prefix
    /// keys of their full blocks (computed now where they were not yet: the request's
    /// admission uses them) and how many of those blocks are cached. O(n + their blocks *
    /// BLOCK_SIZE).
    pub fn waiting_heads(&mut self, n: usize) -> Vec<WaitingHead<'_>> {
        let ids: Vec<u64> = self.waiting.iter().take(n).copied().collect();
        for id in &ids {
            self.requests.get_mut(id).expect("waiting").update_keys();
        }
        ids.into_iter()
            .map(|id| {
                let st = &self.requests[&id];
                let (tokens, salt) = (&st.tokens[..st.known_len()], st.salt.as_deref());
                let cached = self.kv.lookup(&st.keys, tokens, salt, st.keys.len());
                WaitingHead {
                    id,
                    tokens,
                    salt,
                    keys: &st.keys,
                    cached_blocks: cached.len(),
                }
            })
            .collect()
    }

    /// Keeps waiting request `id`, and the requests behind it in the queue, from being
    /// admitted until [`Self::release`], while blocks of its prompt are on their way into the
    /// cache (read from disk); running requests go on. False if `id` is not waiting.
    pub fn hold(&mut self, id: u64) -> bool {
        if !self.waiting.contains(&id) {
            return false;
        }
        self.requests.get_mut(&id).expect("waiting").held = true;
        true
    }

    /// Lets a held request be admitted again (nothing if it is gone).
    pub fn release(&mut self, id: u64) {
        if let Some(st) = self.requests.get_mut(&id) {
            st.held = false;
        }
    }

    /// Records the blocks the CPU tier drops to make room ([`Self::take_spilled`]), so a
    /// tier below it can keep them.
    pub fn enable_spill(&mut self) {
        self.kv.spilled.get_or_insert_with(Vec::new);
    }

    /// The blocks dropped from the CPU tier since the last call. Their bytes are in their
    /// CPU ids until the step that dropped them ends (or the import that did fills them):
    /// read them before.
    pub fn take_spilled(&mut self) -> Vec<Spilled> {
        self.kv
            .spilled
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

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
    /// skipped. At most the CPU tier's capacity is stored, so no import evicts itself. The
    /// first `cached` blocks come without bytes: they must be cached here already, and the
    /// chain stops at the first that is not.
    pub fn import_blocks(
        &mut self,
        tokens: &[u32],
        keys: &[u64],
        salt: Option<&str>,
        cached: usize,
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
                // Its adapter is in its salt; the exporter's id means nothing here.
                lora: None,
            };
            if i < cached {
                match self.kv.entry(key) {
                    Some(e) if e.matches(parent, t, salt.as_deref()) => parent = Some(e.id),
                    _ => break,
                }
                parent_key = Some(key);
                continue;
            }
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
