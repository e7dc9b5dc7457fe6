//! Errors of the GPU worker.

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error(
        "no GPU adapter found ({0}). Install a Vulkan driver: on Debian or Ubuntu, \
         `apt-get install mesa-vulkan-drivers` gives the lavapipe CPU device; \
         set WGPU_BACKEND=vulkan to choose it"
    )]
    NoAdapter(String),
    #[error("GPU device error: {0}")]
    Device(String),
    #[error("shape mismatch in {op}: {detail}")]
    Shape { op: &'static str, detail: String },
    #[error("invalid batch: {0}")]
    Batch(String),
    #[error("the batch needs {needed} {what}, the runner was built for at most {max}")]
    Capacity {
        what: &'static str,
        needed: usize,
        max: usize,
    },
    #[error("device memory: {0}")]
    Memory(String),
    #[error(transparent)]
    Model(#[from] kiln_model::ModelError),
}
