//! The GPU KV block pool: reference counts and the LRU free queue.
//!
//! Invariants:
//! - a block is in the free queue if and only if its reference count is zero;
//! - a freed block keeps its prefix-cache hash (if it has one) until it is popped for reuse,
//!   so a later request can revive it with [`BlockPool::touch`];
//! - freed blocks without a hash go to the front of the queue (reused first, they hold nothing
//!   of value); freed cached blocks go to the back, so the least recently freed cached block is
//!   evicted first.
//!
//! Cost: `touch`, `release`, `pop_free`, `set_hash`, `take_hash`, `num_free` and `num_cached` are O(1).

use crate::lru::LruList;

#[derive(Debug)]
pub(crate) struct BlockPool {
    ref_cnt: Vec<u32>,
    hash: Vec<Option<u64>>,
    free: LruList,
    num_cached: usize,
}

impl BlockPool {
    /// A pool of `n` free, uncached blocks, handed out in id order.
    pub fn new(n: usize) -> Self {
        let mut free = LruList::new(n);
        for b in 0..n as u32 {
            free.push_back(b);
        }
        Self {
            ref_cnt: vec![0; n],
            hash: vec![None; n],
            free,
            num_cached: 0,
        }
    }

    pub fn num_blocks(&self) -> usize {
        self.ref_cnt.len()
    }

    /// Blocks with no users (including cached ones that may still be revived).
    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    pub fn ref_cnt(&self, b: u32) -> u32 {
        self.ref_cnt[b as usize]
    }

    pub fn hash(&self, b: u32) -> Option<u64> {
        self.hash[b as usize]
    }

    pub fn is_free(&self, b: u32) -> bool {
        self.free.contains(b)
    }

    /// Adds a user to `b`, taking it off the free queue if it had none.
    pub fn touch(&mut self, b: u32) {
        if self.ref_cnt[b as usize] == 0 {
            self.free.remove(b);
        }
        self.ref_cnt[b as usize] += 1;
    }

    /// Drops a user of `b`; at zero users the block joins the free queue.
    pub fn release(&mut self, b: u32) {
        let r = &mut self.ref_cnt[b as usize];
        assert!(*r > 0, "block {b} released more often than acquired");
        *r -= 1;
        if *r == 0 {
            if self.hash[b as usize].is_some() {
                self.free.push_back(b);
            } else {
                self.free.push_front(b);
            }
        }
    }

    /// Takes the least recently freed block off the queue with one user. Its stale hash is
    /// still set: the caller must evict it ([`Self::take_hash`]) before writing the block.
    pub fn pop_free(&mut self) -> Option<u32> {
        let b = self.free.pop_front()?;
        self.ref_cnt[b as usize] = 1;
        Some(b)
    }

    pub fn set_hash(&mut self, b: u32, h: u64) {
        assert!(self.hash[b as usize].is_none(), "block {b} already cached");
        self.hash[b as usize] = Some(h);
        self.num_cached += 1;
    }

    pub fn take_hash(&mut self, b: u32) -> Option<u64> {
        let h = self.hash[b as usize].take();
        self.num_cached -= h.is_some() as usize;
        h
    }

    /// Blocks holding a prefix-cache entry, in use or free.
    pub fn num_cached(&self) -> usize {
        self.num_cached
    }

    /// Free-queue order, least recently freed first (for invariant checks).
    pub fn free_blocks(&self) -> impl Iterator<Item = u32> + '_ {
        self.free.iter()
    }
}
