//! Scheduler configuration and errors.

use kiln_core::BLOCK_SIZE;

use crate::Speculation;
use thiserror::Error;

/// Limits and switches of one [`crate::Scheduler`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Token budget of one step (prefill chunks plus decodes).
    pub max_num_batched_tokens: usize,
    /// Most requests running at once; clamped to `num_gpu_blocks` (each needs a block). Each
    /// running request holds one of the runner's block-table rows, `0..max_num_seqs`, so the
    /// runner must have at least this many.
    pub max_num_seqs: usize,
    /// KV blocks of `BLOCK_SIZE` tokens in the GPU pool.
    pub num_gpu_blocks: usize,
    /// Host block ids for the CPU tier of cold prefix-cache blocks; 0 turns the tier off.
    pub num_cpu_blocks: usize,
    pub enable_prefix_caching: bool,
    /// Longest sequence (prompt + output) the model takes.
    pub max_model_len: usize,
    /// Entries of the runner's penalty pool, used in pages of [`kiln_core::PENALTY_PAGE`]:
    /// each running request with penalties or a logit bias holds pages for its list (its
    /// distinct history tokens and its biased tokens) from its first sampled step until it
    /// stops running. A request whose list could outgrow the whole pool is refused.
    pub max_penalty_entries: usize,
    /// Rows of the runner's sampler one step may use: one per sampled sequence, one per
    /// scored prompt row (prompt logprobs).
    pub max_sampler_rows: usize,
    /// Every layer attends to at most this many latest positions (Mistral's sliding window):
    /// a running request gives back each block that lies wholly before the window of its
    /// next token. `None` (a model with any global layer, such as Gemma 3): a request keeps
    /// every block of its context.
    pub sliding_window: Option<usize>,
    /// Guesses of a decode's next tokens from its own history (`speculation.rs`); `None`
    /// decodes one token per step.
    pub speculation: Option<Speculation>,
    /// The runner's slots for LoRA adapters (`lora_slots.rs`): a step's requests run through
    /// at most this many adapters. Adapters `0..lora_resident` sit in slots `0..` from the
    /// start; with `lora_loads`, any other registered adapter is loaded into a slot when a
    /// request needs it (the runner's slots can be rewritten), else none is.
    pub lora_slots: usize,
    pub lora_resident: usize,
    pub lora_loads: bool,
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
            max_sampler_rows: 256,
            sliding_window: None,
            speculation: None,
            lora_slots: 0,
            lora_resident: 0,
            lora_loads: false,
        }
    }
}

impl SchedulerConfig {
    /// Longest sequence (prompt + output) a request may reach: `max_model_len`, or what the
    /// whole pool holds if less. With a window on every layer a request holds at most
    /// `window + chunk` tokens' blocks plus one (from its window's first position to the end
    /// of its chunk), so when the pool holds that for a whole step's budget, `max_model_len`
    /// stands even beyond the pool.
    pub fn max_len(&self) -> usize {
        let pool_tokens = self.num_gpu_blocks * BLOCK_SIZE;
        match self.sliding_window {
            Some(w)
                if (w + self.max_num_batched_tokens).div_ceil(BLOCK_SIZE) < self.num_gpu_blocks =>
            {
                self.max_model_len
            }
            _ => self.max_model_len.min(pool_tokens),
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchedulerError {
    #[error("request {id}: prompt is empty")]
    EmptyPrompt { id: u64 },
    #[error("request {id}: prompt of {len} tokens leaves no room to generate (limit {limit})")]
    PromptTooLong { id: u64, len: usize, limit: usize },
    #[error("request {id}: max_tokens must be at least 1 (0 only when scoring the prompt)")]
    ZeroMaxTokens { id: u64 },
    #[error("request {id}: {why}")]
    InvalidSampling { id: u64, why: String },
    #[error("request {id} already exists")]
    DuplicateId { id: u64 },
    #[error(
        "request {id}: its penalty list may reach {needed} entries (distinct history and biased \
         tokens), but the runner's penalty pool holds {limit} (lower max_tokens or drop the \
         penalties)"
    )]
    TooManyPenaltyEntries {
        id: u64,
        needed: usize,
        limit: usize,
    },
    #[error("request {id}: runs through LoRA adapter {adapter}, which no slot can take")]
    NoLoraSlot { id: u64, adapter: u32 },
}
