//! The CPU tier: ids of host KV blocks holding evicted prefix-cache blocks.
//!
//! The runner owns the host memory; this only tracks which id holds which prefix key.
//!
//! Invariants: every id is exactly one of free, stored (in the LRU queue, with a key) or
//! pending (taken for a swap-in this step). Pending ids become free only at [`CpuTier::end_step`]:
//! the runner performs a step's `swap_out` copies before its `swap_in` copies, so an id read
//! by a swap-in must not be the target of a swap-out in the same step.
//!
//! Cost: `store`, `take` are O(1); `end_step` is O(pending).

use crate::lru::LruList;

#[derive(Debug)]
pub(crate) struct CpuTier {
    key: Vec<Option<u64>>,
    free: Vec<u32>,
    lru: LruList,
    pending: Vec<u32>,
}

impl CpuTier {
    pub fn new(n: usize) -> Self {
        Self {
            key: vec![None; n],
            free: (0..n as u32).rev().collect(),
            lru: LruList::new(n),
            pending: Vec::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.key.len()
    }

    pub fn num_stored(&self) -> usize {
        self.lru.len()
    }

    /// Stores `key` in a free id, or in the least recently stored one. Returns the id and the
    /// key it displaced, or `None` if every id is pending (or the tier is off).
    pub fn store(&mut self, key: u64) -> Option<(u32, Option<u64>)> {
        let (id, evicted) = match self.free.pop() {
            Some(id) => (id, None),
            None => {
                let id = self.lru.pop_front()?;
                (id, self.key[id as usize].take())
            }
        };
        self.key[id as usize] = Some(key);
        self.lru.push_back(id);
        Some((id, evicted))
    }

    /// Takes `id` out for a swap-in; it is reusable after this step.
    pub fn take(&mut self, id: u32) -> u64 {
        self.lru.remove(id);
        self.pending.push(id);
        self.key[id as usize]
            .take()
            .expect("taking an empty CPU block")
    }

    /// Frees a stored id whose content is lost; returns the key it held (`None` if it was
    /// not stored, e.g. already taken for a swap-in).
    pub fn discard(&mut self, id: u32) -> Option<u64> {
        let key = self.key[id as usize].take()?;
        self.lru.remove(id);
        self.free.push(id);
        Some(key)
    }

    pub fn end_step(&mut self) {
        self.free.append(&mut self.pending);
    }

    pub fn key(&self, id: u32) -> Option<u64> {
        self.key[id as usize]
    }

    /// Checks the partition free / stored / pending.
    pub fn check(&self) -> Result<(), String> {
        let n = self.free.len() + self.lru.len() + self.pending.len();
        if n != self.capacity() {
            return Err(format!(
                "cpu tier: {n} ids accounted for, capacity {}",
                self.capacity()
            ));
        }
        for id in self.lru.iter() {
            if self.key[id as usize].is_none() {
                return Err(format!("cpu block {id} stored without key"));
            }
        }
        for &id in self.free.iter().chain(&self.pending) {
            if self.key[id as usize].is_some() || self.lru.contains(id) {
                return Err(format!("cpu block {id} free but holds a key"));
            }
        }
        Ok(())
    }
}
