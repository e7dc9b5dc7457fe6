#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Gpu(#[from] kiln_gpu::GpuError),
    #[error(transparent)]
    Scheduler(#[from] kiln_scheduler::SchedulerError),
    #[error(transparent)]
    Model(#[from] kiln_model::ModelError),
    #[error("{0}")]
    Config(String),
    /// A step's forward pass failed; its requests (`failed`) were removed, the rest go on.
    #[error("the step failed: {reason}")]
    StepFailed { failed: Vec<u64>, reason: String },
    /// The GPU device is gone: the engine cannot run another step and must be rebuilt.
    /// The requests of the step that saw it are in `failed`; the others are still queued.
    #[error("the GPU device was lost: {reason}")]
    DeviceLost { failed: Vec<u64>, reason: String },
}
