//! Prefix-cache keys and the index from key to stored block.
//!
//! A full block's key is a chained 64-bit hash: `hash(parent_key, token_ids, cache_salt)`, so
//! equal keys mean equal prefixes, barring collisions. Collisions are made harmless by
//! verification: every entry stores its 16 token ids, its salt and the *entry id* of its parent
//! block. Entry ids are never reused, so a hit on block `i` is accepted only if the entry's
//! tokens and salt equal the request's and its parent is exactly the entry accepted for block
//! `i - 1`. Two different prefixes can then never share a block, even if their hashes collide
//! (the second one is simply not cached). A child whose parent entry was dropped becomes
//! unreachable and ages out of the LRU queues.
//!
//! Cost: `key` is O(BLOCK_SIZE); `get`, `insert`, `remove` are O(1) expected (hash map).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use kiln_core::BLOCK_SIZE;

/// The chained hash of one full block.
pub(crate) fn block_key(parent: Option<u64>, tokens: &[u32], salt: Option<&str>) -> u64 {
    debug_assert_eq!(tokens.len(), BLOCK_SIZE);
    let mut h = DefaultHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    salt.hash(&mut h);
    h.finish()
}

/// Where a cached block's KV lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    Gpu(u32),
    Cpu(u32),
    /// Taken out of the CPU tier this step, GPU block not yet assigned (transient).
    Moving,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub id: u64,
    pub parent: Option<u64>,
    /// The parent block's key (for KV events); `parent` is its entry id.
    pub parent_key: Option<u64>,
    pub tokens: [u32; BLOCK_SIZE],
    pub salt: Option<Arc<str>>,
    /// The LoRA adapter it was computed through (for KV events).
    pub lora: Option<u32>,
    pub loc: Loc,
}

impl Entry {
    pub fn matches(&self, parent: Option<u64>, tokens: &[u32], salt: Option<&str>) -> bool {
        self.parent == parent && self.tokens[..] == *tokens && self.salt.as_deref() == salt
    }
}

/// A full block as the index records it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewBlock<'a> {
    pub key: u64,
    /// The parent block's entry id.
    pub parent: Option<u64>,
    /// The parent block's key (for KV events).
    pub parent_key: Option<u64>,
    pub tokens: &'a [u32],
    pub salt: Option<&'a Arc<str>>,
    /// The LoRA adapter it was computed through, where known (for KV events).
    pub lora: Option<u32>,
}

/// Outcome of registering a freshly computed block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Registered {
    /// The block is now cached under a new entry id.
    New(u64),
    /// An identical entry already exists (another request computed it too); the caller's block
    /// stays private and the chain continues from the existing entry id.
    Duplicate(u64),
    /// A different prefix owns this hash: the caller's chain stops being cached.
    Collision,
}

#[derive(Debug, Default)]
pub(crate) struct PrefixIndex {
    map: HashMap<u64, Entry>,
    next_id: u64,
}

impl PrefixIndex {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, key: u64) -> Option<&Entry> {
        self.map.get(&key)
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut Entry> {
        self.map.get_mut(&key)
    }

    pub fn remove(&mut self, key: u64) -> Option<Entry> {
        self.map.remove(&key)
    }

    /// Registers a computed block at `loc` unless its key is taken.
    pub fn insert(&mut self, b: NewBlock, loc: Loc) -> Registered {
        if let Some(e) = self.map.get(&b.key) {
            return if e.matches(b.parent, b.tokens, b.salt.map(|s| &**s)) {
                Registered::Duplicate(e.id)
            } else {
                Registered::Collision
            };
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut tokens = [0u32; BLOCK_SIZE];
        tokens.copy_from_slice(b.tokens);
        self.map.insert(
            b.key,
            Entry {
                id,
                parent: b.parent,
                parent_key: b.parent_key,
                tokens,
                salt: b.salt.cloned(),
                lora: b.lora,
                loc,
            },
        );
        Registered::New(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &Entry)> {
        self.map.iter().map(|(k, e)| (*k, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collision_is_not_a_hit() {
        let mut idx = PrefixIndex::default();
        let a = [1u32; BLOCK_SIZE];
        let b = [2u32; BLOCK_SIZE];
        // Force both prefixes onto the same key, as a collision would.
        let block = |tokens| NewBlock {
            key: 7,
            parent: None,
            parent_key: None,
            tokens,
            salt: None,
            lora: None,
        };
        assert_eq!(idx.insert(block(&a), Loc::Gpu(0)), Registered::New(0));
        assert_eq!(idx.insert(block(&a), Loc::Gpu(1)), Registered::Duplicate(0));
        assert_eq!(idx.insert(block(&b), Loc::Gpu(2)), Registered::Collision);
        let salt: Arc<str> = "tenant".into();
        assert!(!idx.get(7).unwrap().matches(None, &a, Some(&salt)));
        assert!(!idx.get(7).unwrap().matches(Some(3), &a, None));
        assert_ne!(block_key(None, &a, None), block_key(None, &a, Some("x")));
        assert_ne!(block_key(None, &a, None), block_key(Some(1), &a, None));
    }
}
