//! kiln's engine: one [`Engine::step`] is the three calls of a serving step, schedule,
//! run on the GPU, and post-process. The engine has no threads and never blocks (the GPU
//! readback is awaited), so the same code runs on a server's engine thread (driven by
//! `pollster`) and in a browser tab. Natively, `disk_tier` keeps cached KV blocks in files
//! below the CPU tier.

mod constraint;
#[cfg(not(target_arch = "wasm32"))]
pub mod disk_tier;
mod engine;
mod error;
#[cfg(feature = "fault-injection")]
mod fault;
mod grammar_compiler;
mod lora;
mod overlap;
mod reasoning_budget;
mod step;
mod transfer;

pub use constraint::{Constraint, ConstraintFactory};
pub use engine::{Engine, EngineConfig, KvSize};
pub use error::EngineError;
#[cfg(feature = "fault-injection")]
pub use fault::FaultPlan;
pub use grammar_compiler::{CompileError, GrammarCompiler};
pub use kiln_core::{Grammar, LogprobsMode, MAX_DRAFTS, SampledToken, SamplingParams, TokenFilter};
pub use kiln_gpu::ops::{LoraCapacity, MAX_LORA_SLOTS};
pub use kiln_gpu::{KernelFamily, KvDtype, KvLayout, WeightStorage};
pub use kiln_scheduler::{
    FinishReason, KvEvent, LoraRef, Medium, Request, RequestUpdate, SchedulerStats, Speculation,
};
pub use lora::LoraRequests;
pub use overlap::Overlap;
pub use transfer::{ExportedBlocks, SavedBlock};
