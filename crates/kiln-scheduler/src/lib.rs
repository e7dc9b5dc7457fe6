//! kiln's scheduler: the CPU-side brain of the engine. It owns the requests, the paged KV block
//! pool, the prefix cache and the CPU tier, and each step turns them into one
//! [`kiln_core::StepBatch`] for the GPU runner; the runner's sampled tokens come back through
//! [`Scheduler::update`]. No GPU, no threads, no async.
//!
//! Layout, one concept per file:
//! - `lru`: intrusive O(1) LRU list over indices.
//! - `block_pool`: GPU blocks, reference counts, LRU free queue.
//! - `prefix_hash`: chained block keys and the verified prefix-cache index.
//! - `cpu_tier`: host block ids for evicted cached blocks.
//! - `kv_cache`: the three above together, plus the step's swap copies.
//! - `kv_events`: what the prefix cache gains and loses, for routers (off unless enabled).
//! - `table_rows`: the runner's block-table rows, sent by difference.
//! - `lora_slots`: which LoRA adapter each of the runner's adapter slots holds.
//! - `penalty_list`: a request's penalised and biased tokens, counted as they come.
//! - `speculation`: guesses of a decode's next tokens from its own history (prompt lookup).
//! - `request`, `scheduler`, `output`, `stats`, `config`: the public face (`scheduler/`:
//!   failed steps, sliding windows, blocks pinned for and imported from another server).
//! - [`testing`]: a fake runner for deterministic simulations.

mod block_pool;
mod config;
mod cpu_tier;
mod kv_cache;
mod kv_events;
mod lora_slots;
mod lru;
mod output;
mod penalty_list;
mod prefix_hash;
mod request;
mod scheduler;
mod speculation;
mod stats;
mod table_rows;
pub mod testing;

pub use config::{SchedulerConfig, SchedulerError};
pub use kv_cache::Spilled;
pub use kv_events::{KvEvent, Medium};
pub use lora_slots::LoraLoad;
pub use output::{FinishReason, RequestUpdate, ScheduledSeq, ScheduledStep};
pub use penalty_list::BANNED;
pub use request::{LoraRef, Request};
pub use scheduler::{BlockPlace, CachedBlock, PinnedBlocks, Scheduler, WaitingHead, prefix_keys};
pub use speculation::Speculation;
pub use stats::SchedulerStats;
