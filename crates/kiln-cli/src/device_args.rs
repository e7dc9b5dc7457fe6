//! The device-side engine flags `generate` and `serve` share: kernel family, weights, KV cache
//! type and overlapped steps.

use kiln_engine::{EngineConfig, KernelFamily, KvDtype, Overlap, WeightStorage};

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
    /// KV cache element type: f16 (packed in pairs, twice the tokens per byte) or f32.
    #[arg(long, default_value = "f16")]
    pub kv_dtype: KvDtype,
    /// Submit the next step while the GPU runs the current one: auto (on, except on CPU-backed
    /// adapters such as lavapipe, where it measured slower), on or off. Outputs are the same.
    #[arg(long, default_value = "auto")]
    pub overlap: Overlap,
}

impl DeviceArgs {
    /// `ec` with these choices.
    pub fn apply(self, ec: EngineConfig) -> EngineConfig {
        EngineConfig {
            kernels: self.kernels,
            kv_dtype: self.kv_dtype,
            weights: self.weights,
            overlap: self.overlap,
            ..ec
        }
    }
}
