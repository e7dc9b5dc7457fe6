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
}
