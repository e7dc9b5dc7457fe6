//! Scheduler configuration and errors.

use thiserror::Error;

/// Limits and switches of one [`crate::Scheduler`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Token budget of one step (prefill chunks plus decodes).
    pub max_num_batched_tokens: usize,
    /// Most requests running at once; clamped to `num_gpu_blocks` (each needs a block).
    pub max_num_seqs: usize,
    /// KV blocks of `BLOCK_SIZE` tokens in the GPU pool.
    pub num_gpu_blocks: usize,
    /// Host block ids for the CPU tier of cold prefix-cache blocks; 0 turns the tier off.
    pub num_cpu_blocks: usize,
    pub enable_prefix_caching: bool,
    /// Longest sequence (prompt + output) the model takes.
    pub max_model_len: usize,
    /// Penalty entries (distinct history tokens of sampled sequences with penalties) one step
    /// may carry: the runner's penalty buffer. Each such sequence is counted at its length.
    pub max_penalty_entries: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            max_num_batched_tokens: 2048,
            max_num_seqs: 256,
            num_gpu_blocks: 4096,
            num_cpu_blocks: 0,
            enable_prefix_caching: true,
            max_model_len: 8192,
            max_penalty_entries: usize::MAX,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchedulerError {
    #[error("request {id}: prompt is empty")]
    EmptyPrompt { id: u64 },
    #[error("request {id}: prompt of {len} tokens leaves no room to generate (limit {limit})")]
    PromptTooLong { id: u64, len: usize, limit: usize },
    #[error("request {id}: max_tokens must be at least 1")]
    ZeroMaxTokens { id: u64 },
    #[error("request {id}: {why}")]
    InvalidSampling { id: u64, why: String },
    #[error("request {id} already exists")]
    DuplicateId { id: u64 },
    #[error(
        "request {id}: with penalties it may reach {needed} tokens, but one step holds penalty \
         entries for at most {limit} (lower max_tokens or drop the penalties)"
    )]
    TooManyPenaltyEntries {
        id: u64,
        needed: usize,
        limit: usize,
    },
}
