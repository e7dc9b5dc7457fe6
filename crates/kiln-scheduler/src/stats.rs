//! Counters for metrics and tests. Taking a snapshot is O(1).

/// A snapshot of the scheduler's state and counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    pub num_running: usize,
    pub num_waiting: usize,
    /// Preemptions since start.
    pub num_preemptions: u64,
    /// GPU blocks with at least one user.
    pub kv_blocks_used: usize,
    /// GPU blocks with no users (cached ones included: they can be reused).
    pub kv_blocks_free: usize,
    /// GPU blocks holding a prefix-cache entry, in use or not.
    pub kv_blocks_cached: usize,
    /// Prompt (or recompute) tokens looked up in the prefix cache, since start.
    pub prefix_cache_queries: u64,
    /// Of those, tokens found (GPU or CPU tier), since start.
    pub prefix_cache_hits: u64,
    /// Blocks copied GPU -> CPU tier, since start.
    pub cpu_blocks_stored: u64,
    /// Blocks copied CPU tier -> GPU instead of being recomputed, since start.
    pub cpu_blocks_restored: u64,
    /// Blocks given back by running requests because they lay before every layer's sliding
    /// window, since start.
    pub window_released_blocks: u64,
    /// Blocks currently held by the CPU tier.
    pub cpu_blocks_resident: usize,
    /// Prefill (non-decode) tokens in the last scheduled step.
    pub step_prefill_tokens: usize,
    /// Decode tokens in the last scheduled step.
    pub step_decode_tokens: usize,
    /// Prefill tokens scheduled since start.
    pub total_prefill_tokens: u64,
    /// Decode tokens scheduled since start.
    pub total_decode_tokens: u64,
    /// Steps the runner could not run ([`crate::Scheduler::fail_step`]), since start.
    pub num_failed_steps: u64,
    /// Requests removed by failed steps, since start.
    pub num_failed_requests: u64,
    /// LoRA adapters loaded into a runner slot for a step, since start (`lora_slots.rs`).
    pub lora_loads: u64,
    /// LoRA adapters read again from their files, having let go of their values, since
    /// start (the engine's count: `kiln_engine`'s `lora.rs`).
    pub lora_reads: u64,
    /// GPU blocks pinned for a decode server to fetch (prefill/decode split).
    pub kv_blocks_pinned: usize,
    /// Blocks fetched from a prefill server stored in the CPU tier, since start.
    pub imported_blocks: u64,
    /// Guesses of decodes' next tokens computed (speculative decoding), since start.
    pub spec_draft_tokens: u64,
    /// Of those, guesses the model's own draws confirmed (each one more token for the step
    /// that computed it), since start.
    pub spec_accepted_tokens: u64,
    /// Pages of the runner's penalty pool held by running requests' penalty lists.
    pub penalty_pages_used: usize,
}
