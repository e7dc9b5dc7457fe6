//! The engine flags `generate`, `chat`, `serve` and `speed` share: kernel family, weights, KV
//! cache type, overlapped steps and speculative decoding.

use kiln_engine::{EngineConfig, KernelFamily, KvDtype, Overlap, Speculation, WeightStorage};

#[derive(clap::Args, Clone, Copy)]
pub struct DeviceArgs {
    /// Matmul and attention kernels: auto (by device type: cpu on CPU-backed adapters such as
    /// lavapipe, gpu elsewhere), gpu (tiled, workgroup memory) or cpu (row-wise).
    #[arg(long, default_value = "auto")]
    pub kernels: KernelFamily,
    /// Quantized matrices on the GPU: quantized (kept in their blocks, the file's size) or
    /// f16 (widened).
    #[arg(long, default_value = "quantized")]
    pub weights: WeightStorage,
    /// KV cache element type: f16 (packed in pairs, twice the tokens per byte of f32), q8_0
    /// (bytes with an f16 scale per 32: 1.88x the tokens of f16; needs KV heads x head size a
    /// multiple of 64), fp8 (E4M3 bytes, also named fp8_e4m3: twice the tokens of f16, values
    /// beyond +-448 saturated; coarser than q8_0) or f32.
    #[arg(long, default_value = "f16")]
    pub kv_dtype: KvDtype,
    /// Submit the next step while the GPU runs the current one: auto (on, except on CPU-backed
    /// adapters such as lavapipe, where it measured slower), on or off. Outputs are the same.
    #[arg(long, default_value = "auto")]
    pub overlap: Overlap,
    /// Speculative decoding by prompt lookup: each decode carries up to this many guesses of
    /// its next tokens, taken from what followed the latest earlier occurrence of its last
    /// tokens in its prompt and output, and keeps those the model's draws confirm (outputs
    /// are the same; requests with grammars or token filters are not guessed for, nor those
    /// reporting raw log-probabilities with penalties, a logit bias or min_tokens). 0: off;
    /// at most 15.
    #[arg(long, default_value_t = 0)]
    pub speculative_tokens: usize,
    /// Shortest run of last tokens looked up for guesses.
    #[arg(long, default_value_t = Speculation::prompt_lookup(0).lookup_min)]
    pub prompt_lookup_min: usize,
    /// Longest run of last tokens looked up for guesses (longer runs are tried first).
    #[arg(long, default_value_t = Speculation::prompt_lookup(0).lookup_max)]
    pub prompt_lookup_max: usize,
}

impl DeviceArgs {
    /// `ec` with these choices.
    pub fn apply(self, ec: EngineConfig) -> EngineConfig {
        EngineConfig {
            kernels: self.kernels,
            kv_dtype: self.kv_dtype,
            weights: self.weights,
            overlap: self.overlap,
            speculation: (self.speculative_tokens > 0).then_some(Speculation {
                num_tokens: self.speculative_tokens,
                lookup_min: self.prompt_lookup_min,
                lookup_max: self.prompt_lookup_max,
            }),
            ..ec
        }
    }
}
