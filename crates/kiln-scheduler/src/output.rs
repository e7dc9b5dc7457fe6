//! What one step hands to the runner, and what comes back out to the engine.

use kiln_core::{SampledToken, StepBatch};

/// One scheduled step: the batch for the runner plus the scheduler's bookkeeping for it. Hand
/// it back to [`crate::Scheduler::update`] with the runner's sampled tokens (or to `commit`,
/// then `resolve`).
#[derive(Clone, Debug)]
pub struct ScheduledStep {
    pub batch: StepBatch,
    /// One entry per sequence, in the order of `batch.seqs`.
    pub seqs: Vec<ScheduledSeq>,
    /// LoRA adapters to write into the runner's slots before the step runs (after the step
    /// before it was submitted: that one keeps what it read).
    pub lora_loads: Vec<crate::LoraLoad>,
    /// Set by [`crate::Scheduler::commit`].
    pub(crate) committed: bool,
}

/// A request's share of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledSeq {
    pub id: u64,
    /// Tokens already in the KV cache before this step (computed or hit in the prefix cache).
    pub num_computed_before: usize,
    /// Tokens computed this step (`query_len`).
    pub num_tokens: usize,
    /// Whether the step samples this request's next token.
    pub sampled: bool,
    /// True for a one-token step that computes the previous output token (a decode).
    pub is_decode: bool,
    /// Prompt rows this step scores (prompt logprobs).
    pub scored: usize,
    /// Guesses of the next tokens the step computes after the request's last token
    /// (speculative decoding; counted in `num_tokens`), each with a sampled row.
    pub drafts: usize,
}

impl ScheduledStep {
    /// `(id, num_tokens)` of each sequence, for assertions and logs.
    pub fn summary(&self) -> Vec<(u64, usize)> {
        self.seqs.iter().map(|s| (s.id, s.num_tokens)).collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An EOS token (unless `ignore_eos`) or a stop token id was produced.
    Stop,
    /// `max_tokens` was reached, or the sequence reached its length limit.
    Length,
    Abort,
}

/// Progress of one request after a step (or an abort).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestUpdate {
    pub id: u64,
    /// The newly generated token, if this step sampled one.
    pub token: Option<SampledToken>,
    /// Prompt tokens scored this step, in order (prompt logprobs): each with its
    /// log-probability given the tokens before it and the most likely alternatives there.
    /// The first prompt token is never scored.
    pub prompt_logprobs: Vec<SampledToken>,
    pub finished: Option<FinishReason>,
    /// `token` is an end-of-sequence or stop token id and ended the sequence: it writes no
    /// text of its own.
    pub ended_by_token: bool,
    /// Prompt tokens served from the prefix cache (GPU or CPU tier) when first admitted.
    pub num_cached_tokens: usize,
}
