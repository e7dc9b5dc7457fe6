//! kiln's GPU worker. It owns the device, the weights (f16 or kept quantized), the paged KV cache and the WGSL
//! kernels, and runs one [`kiln_core::StepBatch`] as one forward pass plus sampling: every
//! kernel of a step goes into one command encoder and one submit, and the only readback is
//! the sampled token ids.
//!
//! Layout: `context` opens the device; `kernels` compiles and caches the pipelines of
//! `shaders/*.wgsl`; `launch` is one recorded dispatch; `ops/` builds the launches of each
//! kernel with its shape checks; `bandwidth` measures the memory ceiling decode is held to; `weight_format` names the GPU weight formats and repacks GGUF blocks;
//! `matrix` holds weight matrices split to fit a storage binding;
//! `kv_layout` owns the KV element type and byte arithmetic; `kv_cache` is the paged cache and
//! its CPU tier; `step_inputs` uploads a batch description; `penalty_store` keeps the
//! penalty lists between steps;
//! `runner` is the forward pass; `reference` is the plain CPU forward pass tests compare with.

mod bandwidth;
mod context;
mod error;
mod fp8;
mod kernel_family;
mod kernels;
mod kv_cache;
mod kv_layout;
mod launch;
mod layer;
mod matrix;
pub mod ops;
mod penalty_store;
mod q8;
pub mod reference;
mod runner;
mod step_inputs;
mod weight_format;

pub use bandwidth::Bandwidth;
pub use context::{DeviceFaults, DeviceMemory, GpuContext};
pub use error::GpuError;
pub use kernel_family::KernelFamily;
pub use kernels::{Kernel, Kernels, PairEpilogue};
pub use kv_cache::KvCache;
pub use kv_layout::{KvDtype, KvLayout};
pub use launch::{Grid, Launch, Recorded};
pub use matrix::GpuMatrix;
pub use runner::{
    ForwardSubmitted, KernelProfile, ModelRunner, OperationTime, RunnerConfig, SubmittedStep,
};
pub use step_inputs::{StepCapacity, StepInputs, StepUniform};
pub use weight_format::{HostMatrix, WeightFormat, WeightStorage, gpu_weight_bytes};
