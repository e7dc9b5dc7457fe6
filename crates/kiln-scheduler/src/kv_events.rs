//! KV-cache events: what the prefix cache gains and loses, for routers that track which
//! replica holds which prefix (llm-d's KV-cache indexer, fed by vLLM-style event streams).
//!
//! The scheduler only records events into a [`KvEventSink`] when enabled (off by default, so
//! nothing grows unread); the server drains them after each step and publishes them. Hashes
//! are the prefix cache's own chained block keys, so a subscriber can match them against keys
//! it computes the same way, and each stored block names its parent key.
//!
//! Guarantees, checked by the scheduler's tests against the cache itself:
//! - the stream starts with [`KvEvent::AllBlocksCleared`] when enabled;
//! - a block is announced stored on a medium before it is announced removed from it, and the
//!   set of blocks stored per medium always equals the cache's index;
//! - every announced parent was announced stored before its child;
//! - a block evicted to the CPU tier is announced removed from `Gpu`, then stored on `Cpu`;
//!   restoring it is removed from `Cpu`, then stored on `Gpu`.

use kiln_core::BLOCK_SIZE;

/// Where a cached block's KV lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Medium {
    Gpu,
    Cpu,
}

impl Medium {
    /// The name vLLM's event stream uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Medium::Gpu => "GPU",
            Medium::Cpu => "CPU",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvEvent {
    /// Full blocks now cached on `medium`: `tokens` holds `BLOCK_SIZE` ids per hash, and
    /// `parent` is the key of the block before the first one (`None` at the prompt's start);
    /// `lora_id`: the engine's id of the LoRA adapter they were computed through (`None`:
    /// none, or blocks imported from elsewhere, whose keys still hold their adapter's salt).
    BlockStored {
        hashes: Vec<u64>,
        parent: Option<u64>,
        tokens: Vec<u32>,
        lora_id: Option<u32>,
        medium: Medium,
    },
    /// Blocks no longer cached on `medium`.
    BlockRemoved { hashes: Vec<u64>, medium: Medium },
    /// Everything was dropped (sent first, so subscribers start from an empty view).
    AllBlocksCleared,
}

impl KvEvent {
    pub fn block_size(&self) -> usize {
        BLOCK_SIZE
    }
}

/// Collects events while enabled.
#[derive(Debug, Default)]
pub(crate) struct KvEventSink {
    enabled: bool,
    events: Vec<KvEvent>,
}

impl KvEventSink {
    /// Starts recording, with an [`KvEvent::AllBlocksCleared`] first.
    pub fn enable(&mut self) {
        self.enabled = true;
        self.events.clear();
        self.events.push(KvEvent::AllBlocksCleared);
    }

    pub fn stored(
        &mut self,
        key: u64,
        parent: Option<u64>,
        tokens: &[u32],
        lora_id: Option<u32>,
        medium: Medium,
    ) {
        if self.enabled {
            self.events.push(KvEvent::BlockStored {
                hashes: vec![key],
                parent,
                tokens: tokens.to_vec(),
                lora_id,
                medium,
            });
        }
    }

    pub fn removed(&mut self, key: u64, medium: Medium) {
        if self.enabled {
            self.events.push(KvEvent::BlockRemoved {
                hashes: vec![key],
                medium,
            });
        }
    }

    pub fn take(&mut self) -> Vec<KvEvent> {
        std::mem::take(&mut self.events)
    }
}
