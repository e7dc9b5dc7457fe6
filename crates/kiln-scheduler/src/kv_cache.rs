//! The KV cache manager: GPU block pool + prefix-cache index + CPU tier, and the block copies
//! between the tiers that the next step must perform.
//!
//! Invariants (checked by [`KvCache::check`]):
//! - a GPU block has a hash iff the index holds an entry for it at `Loc::Gpu(block)`;
//! - a CPU id holds a key iff the index holds an entry for it at `Loc::Cpu(id)`;
//! - only full, computed blocks are in the index, and an indexed block is never written again:
//!   a request only ever writes into blocks it allocated itself, past its cached prefix;
//! - a free GPU block evicted for reuse either moves its entry to the CPU tier (recording a
//!   `swap_out` copy, performed before this step's forward pass writes the block) or drops it.
//!
//! Cost: `allocate(n)` is O(n) (each block: O(1) pop, O(1) eviction); `lookup` is O(k *
//! BLOCK_SIZE) for a k-block hit; `acquire_hits` and `release` are O(blocks).

use kiln_core::{BLOCK_SIZE, BlockCopy, NO_BLOCK};

use crate::block_pool::BlockPool;
use crate::cpu_tier::CpuTier;
use crate::kv_events::{KvEventSink, Medium};
use crate::prefix_hash::{Loc, NewBlock, PrefixIndex, Registered};

/// One block of a prefix-cache hit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub key: u64,
    pub id: u64,
    pub loc: Loc,
}

/// What [`KvCache::import`] did with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Imported {
    /// The same block is cached here already (this entry id); nothing to copy.
    Cached(u64),
    /// Stored under this entry id in this CPU id, whose bytes the runner must fill.
    Stored { entry: u64, cpu: u32 },
    /// Not stored: the CPU tier is off, or a different prefix owns the key.
    Refused,
}

#[derive(Debug)]
pub(crate) struct KvCache {
    pool: BlockPool,
    index: PrefixIndex,
    cpu: CpuTier,
    swap_in: Vec<BlockCopy>,
    swap_out: Vec<BlockCopy>,
    pub cpu_stored_total: u64,
    pub cpu_restored_total: u64,
    pub events: KvEventSink,
    /// Blocks dropped from the CPU tier to make room, while recorded (for a tier below it).
    pub spilled: Option<Vec<Spilled>>,
}

/// A block dropped from the CPU tier whose bytes are still in its CPU id until the step that
/// dropped it ends (or the import that did fills it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spilled {
    pub key: u64,
    pub parent: Option<u64>,
    pub tokens: [u32; BLOCK_SIZE],
    pub cpu: u32,
}

impl KvCache {
    pub fn new(num_gpu_blocks: usize, num_cpu_blocks: usize) -> Self {
        Self {
            pool: BlockPool::new(num_gpu_blocks),
            index: PrefixIndex::default(),
            cpu: CpuTier::new(num_cpu_blocks),
            swap_in: Vec::new(),
            swap_out: Vec::new(),
            cpu_stored_total: 0,
            cpu_restored_total: 0,
            events: KvEventSink::default(),
            spilled: None,
        }
    }

    pub fn num_blocks(&self) -> usize {
        self.pool.num_blocks()
    }

    pub fn num_free(&self) -> usize {
        self.pool.num_free()
    }

    pub fn num_cached(&self) -> usize {
        self.pool.num_cached()
    }

    pub fn num_cpu_stored(&self) -> usize {
        self.cpu.num_stored()
    }

    /// The longest verified chain of cached blocks for `keys` (at most `max_blocks`). A block
    /// moved to the CPU tier in the step being scheduled ends the chain: its bytes reach host
    /// memory only after the step, too late for a swap-in in the same step.
    pub fn lookup(
        &self,
        keys: &[u64],
        tokens: &[u32],
        salt: Option<&str>,
        max_blocks: usize,
    ) -> Vec<Hit> {
        let mut hits = Vec::new();
        let mut parent = None;
        for (i, &key) in keys.iter().take(max_blocks).enumerate() {
            let block_tokens = &tokens[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
            match self.index.get(key) {
                Some(e) if e.matches(parent, block_tokens, salt) && !self.leaving(e.loc) => {
                    hits.push(Hit {
                        key,
                        id: e.id,
                        loc: e.loc,
                    });
                    parent = Some(e.id);
                }
                _ => break,
            }
        }
        hits
    }

    /// Whether `loc` is a CPU id this step's swap-outs fill.
    fn leaving(&self, loc: Loc) -> bool {
        matches!(loc, Loc::Cpu(c) if self.swap_out.iter().any(|s| s.cpu_block == c))
    }

    /// Free blocks that taking `hits` consumes: unused GPU hits leave the free queue and each
    /// CPU hit needs a fresh GPU block.
    pub fn free_blocks_for_hits(&self, hits: &[Hit]) -> usize {
        hits.iter()
            .filter(|h| match h.loc {
                Loc::Gpu(b) => self.pool.ref_cnt(b) == 0,
                _ => true,
            })
            .count()
    }

    /// Takes a user of every hit block, restoring CPU hits into fresh GPU blocks (recorded as
    /// `swap_in` copies). The caller checked [`Self::free_blocks_for_hits`] against `num_free`.
    pub fn acquire_hits(&mut self, hits: &[Hit]) -> Vec<u32> {
        assert!(
            self.free_blocks_for_hits(hits) <= self.num_free(),
            "not enough free blocks for hits"
        );
        let mut blocks = vec![u32::MAX; hits.len()];
        // GPU hits first, so that restoring CPU hits cannot evict them...
        for (i, h) in hits.iter().enumerate() {
            if let Loc::Gpu(b) = h.loc {
                self.pool.touch(b);
                blocks[i] = b;
            }
        }
        // ...and take all CPU hits out of the tier before evictions could displace them.
        for h in hits {
            if let Loc::Cpu(c) = h.loc {
                let key = self.cpu.take(c);
                debug_assert_eq!(key, h.key);
                self.index.get_mut(h.key).expect("hit entry").loc = Loc::Moving;
            }
        }
        for (i, h) in hits.iter().enumerate() {
            if let Loc::Cpu(c) = h.loc {
                let b = self.pop_and_evict().expect("checked free blocks");
                self.pool.set_hash(b, h.key);
                let e = self.index.get_mut(h.key).expect("hit entry");
                e.loc = Loc::Gpu(b);
                self.events.removed(h.key, Medium::Cpu);
                self.events
                    .stored(h.key, e.parent_key, &e.tokens, e.lora, Medium::Gpu);
                self.swap_in.push(BlockCopy {
                    gpu_block: b,
                    cpu_block: c,
                });
                self.cpu_restored_total += 1;
                blocks[i] = b;
            }
        }
        blocks
    }

    /// `n` fresh blocks with one user each, or `None` (and no change) if the pool is short.
    pub fn allocate(&mut self, n: usize) -> Option<Vec<u32>> {
        if n > self.num_free() {
            return None;
        }
        Some(
            (0..n)
                .map(|_| self.pop_and_evict().expect("checked free blocks"))
                .collect(),
        )
    }

    fn pop_and_evict(&mut self) -> Option<u32> {
        let b = self.pool.pop_free()?;
        if let Some(key) = self.pool.take_hash(b) {
            self.events.removed(key, Medium::Gpu);
            match self.cpu.store(key) {
                Some((c, displaced)) => {
                    if let Some(d) = displaced {
                        self.drop_from_cpu(d, c);
                    }
                    let e = self.index.get_mut(key).expect("cached block without entry");
                    e.loc = Loc::Cpu(c);
                    self.events
                        .stored(key, e.parent_key, &e.tokens, e.lora, Medium::Cpu);
                    self.swap_out.push(BlockCopy {
                        gpu_block: b,
                        cpu_block: c,
                    });
                    self.cpu_stored_total += 1;
                }
                None => {
                    self.index.remove(key);
                }
            }
        }
        Some(b)
    }

    /// Stores a block computed by another server in the CPU tier, as if it had been computed
    /// here and evicted; the runner must then fill the returned CPU id with its bytes before
    /// the next step.
    pub fn import(&mut self, b: NewBlock) -> Imported {
        if let Some(e) = self.index.get(b.key) {
            return if e.matches(b.parent, b.tokens, b.salt.map(|s| &**s)) {
                Imported::Cached(e.id)
            } else {
                Imported::Refused
            };
        }
        let Some((c, displaced)) = self.cpu.store(b.key) else {
            return Imported::Refused;
        };
        if let Some(d) = displaced {
            self.drop_from_cpu(d, c);
        }
        match self.index.insert(b, Loc::Cpu(c)) {
            Registered::New(entry) => {
                self.events
                    .stored(b.key, b.parent_key, b.tokens, b.lora, Medium::Cpu);
                Imported::Stored { entry, cpu: c }
            }
            _ => unreachable!("the key was checked absent"),
        }
    }

    /// Forgets block `key`, displaced from CPU id `cpu`; recorded as spilled when asked.
    fn drop_from_cpu(&mut self, key: u64, cpu: u32) {
        if let Some(e) = self.index.remove(key)
            && let Some(spilled) = &mut self.spilled
        {
            spilled.push(Spilled {
                key,
                parent: e.parent_key,
                tokens: e.tokens,
                cpu,
            });
        }
        self.events.removed(key, Medium::Cpu);
    }

    /// Most blocks the CPU tier holds.
    pub fn cpu_capacity(&self) -> usize {
        self.cpu.capacity()
    }

    /// Drops one user of each block, tail first, so a request's last blocks are evicted first
    /// ([`NO_BLOCK`] entries, already given back, are skipped).
    pub fn release(&mut self, blocks: &[u32]) {
        for &b in blocks.iter().rev().filter(|&&b| b != NO_BLOCK) {
            self.pool.release(b);
        }
    }

    /// Records a computed full block, held in GPU block `block`, in the prefix cache.
    pub fn register(&mut self, b: NewBlock, block: u32) -> Registered {
        let r = self.index.insert(b, Loc::Gpu(block));
        if let Registered::New(_) = r {
            self.pool.set_hash(block, b.key);
            self.events
                .stored(b.key, b.parent_key, b.tokens, b.lora, Medium::Gpu);
        }
        r
    }

    /// Drops the prefix-cache entries a failed step's copies were to fill: the GPU blocks
    /// restored by `swap_in` and the CPU ids written by `swap_out` hold nothing reliable.
    pub fn forget_copies(&mut self, swap_in: &[BlockCopy], swap_out: &[BlockCopy]) {
        for c in swap_in {
            if let Some(key) = self.pool.take_hash(c.gpu_block) {
                self.index.remove(key);
                self.events.removed(key, Medium::Gpu);
            }
        }
        for c in swap_out {
            if let Some(key) = self.cpu.discard(c.cpu_block) {
                self.index.remove(key);
                self.events.removed(key, Medium::Cpu);
            }
        }
    }

    /// Drops every cached block no request holds, on the GPU and in the CPU tier (not
    /// recorded as spilled: they are let go, not pushed down); blocks in use stay cached.
    /// Returns how many GPU and CPU blocks were dropped.
    pub fn reset(&mut self) -> (usize, usize) {
        let free: Vec<u32> = self.pool.free_blocks().collect();
        let mut gpu = 0;
        for b in free {
            if let Some(key) = self.pool.take_hash(b) {
                self.index.remove(key);
                self.events.removed(key, Medium::Gpu);
                gpu += 1;
            }
        }
        let mut cpu = 0;
        for c in 0..self.cpu.capacity() as u32 {
            if let Some(key) = self.cpu.discard(c) {
                self.index.remove(key);
                self.events.removed(key, Medium::Cpu);
                cpu += 1;
            }
        }
        (gpu, cpu)
    }

    /// The index entry under `key`.
    pub fn entry(&self, key: u64) -> Option<&crate::prefix_hash::Entry> {
        self.index.get(key)
    }

    /// Every cached block: `(key, parent key, tokens, medium)`.
    pub fn cached_blocks(&self) -> Vec<(u64, Option<u64>, [u32; BLOCK_SIZE], Medium)> {
        self.index
            .iter()
            .filter_map(|(k, e)| {
                let m = match e.loc {
                    Loc::Gpu(_) => Medium::Gpu,
                    Loc::Cpu(_) => Medium::Cpu,
                    Loc::Moving => return None,
                };
                Some((k, e.parent_key, e.tokens, m))
            })
            .collect()
    }

    /// Copies the runner must perform before this step's forward pass: `(swap_in, swap_out)`.
    pub fn take_copies(&mut self) -> (Vec<BlockCopy>, Vec<BlockCopy>) {
        self.cpu.end_step();
        (
            std::mem::take(&mut self.swap_in),
            std::mem::take(&mut self.swap_out),
        )
    }

    /// Checks the invariants; `expected_refs[b]` is the number of requests holding block `b`.
    pub fn check(&self, expected_refs: &[u32]) -> Result<(), String> {
        let n = self.pool.num_blocks();
        let mut zero = 0;
        for b in 0..n as u32 {
            let r = self.pool.ref_cnt(b);
            if r != expected_refs[b as usize] {
                return Err(format!(
                    "block {b}: ref count {r}, held by {} requests",
                    expected_refs[b as usize]
                ));
            }
            if (r == 0) != self.pool.is_free(b) {
                return Err(format!(
                    "block {b}: ref count {r} but free-queue membership {}",
                    self.pool.is_free(b)
                ));
            }
            zero += (r == 0) as usize;
            if let Some(k) = self.pool.hash(b) {
                match self.index.get(k) {
                    Some(e) if e.loc == Loc::Gpu(b) => {}
                    other => {
                        return Err(format!(
                            "block {b}: hash {k:x} indexed as {:?}",
                            other.map(|e| e.loc)
                        ));
                    }
                }
            }
        }
        if zero != self.pool.num_free() || self.pool.free_blocks().count() != zero {
            return Err("free queue length differs from blocks without users".into());
        }
        for (k, e) in self.index.iter() {
            let ok = match e.loc {
                Loc::Gpu(b) => self.pool.hash(b) == Some(k),
                Loc::Cpu(c) => self.cpu.key(c) == Some(k),
                Loc::Moving => false,
            };
            if !ok {
                return Err(format!("entry {k:x} at {:?} is not held there", e.loc));
            }
        }
        if self.index.len() != self.pool.num_cached() + self.cpu.num_stored() {
            return Err("index size differs from cached GPU + stored CPU blocks".into());
        }
        self.cpu.check()
    }
}
