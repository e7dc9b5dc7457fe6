//! The engine: a [`Scheduler`] and a [`ModelRunner`] sized for each other.

use kiln_gpu::{GpuContext, KernelFamily, KvDtype, KvLayout, ModelRunner, RunnerConfig};
use kiln_model::{ModelConfig, Weights};
use kiln_scheduler::{Request, RequestUpdate, Scheduler, SchedulerConfig, SchedulerStats};

use crate::EngineError;

/// How large the GPU KV pool is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KvSize {
    Blocks(usize),
    Bytes(u64),
}

#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub max_num_batched_tokens: usize,
    pub max_num_seqs: usize,
    pub kv: KvSize,
    /// Bytes of host memory for the CPU tier of cold KV blocks (0: off).
    pub cpu_kv_bytes: u64,
    pub enable_prefix_caching: bool,
    /// Longest sequence; `None` takes the model's context length.
    pub max_model_len: Option<usize>,
    /// The matmul and attention kernel family (`Auto`: by device type).
    pub kernels: KernelFamily,
    /// The KV cache's element type (f16 by default: twice the tokens of f32).
    pub kv_dtype: KvDtype,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_num_batched_tokens: 2048,
            max_num_seqs: 256,
            kv: KvSize::Bytes(1 << 30),
            cpu_kv_bytes: 0,
            enable_prefix_caching: true,
            max_model_len: None,
            kernels: KernelFamily::Auto,
            kv_dtype: KvDtype::F16,
        }
    }
}

pub struct Engine {
    scheduler: Scheduler,
    runner: ModelRunner,
}

impl Engine {
    /// Uploads the model and sizes the KV pool, the step budget and the running-request limit
    /// to fit the device and each other.
    pub fn new(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &Weights,
        ec: EngineConfig,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self, EngineError> {
        let max_model_len = ec.max_model_len.unwrap_or(config.max_position_embeddings).min(config.max_position_embeddings);
        let layout = KvLayout::for_model(config, ec.kv_dtype);
        let num_blocks = match ec.kv {
            KvSize::Blocks(n) => n,
            KvSize::Bytes(b) => layout.blocks_in(b).min(layout.max_blocks(ctx.max_binding())),
        };
        if num_blocks == 0 {
            return Err(EngineError::Config("the KV cache budget is smaller than one block".into()));
        }
        let num_cpu_blocks = layout.blocks_in(ec.cpu_kv_bytes);
        let runner = ModelRunner::new(
            ctx,
            config,
            weights,
            RunnerConfig {
                max_tokens: ec.max_num_batched_tokens,
                max_seqs: ec.max_num_seqs,
                num_blocks,
                num_cpu_blocks,
                max_model_len,
                kernels: ec.kernels,
                kv_dtype: ec.kv_dtype,
            },
            progress,
        )?;
        let rc = runner.runner_config;
        let scheduler = Scheduler::new(SchedulerConfig {
            max_num_batched_tokens: rc.max_tokens,
            max_num_seqs: rc.max_seqs,
            num_gpu_blocks: num_blocks,
            num_cpu_blocks,
            enable_prefix_caching: ec.enable_prefix_caching,
            max_model_len,
        });
        Ok(Self { scheduler, runner })
    }

    pub fn add_request(&mut self, request: Request) -> Result<(), EngineError> {
        Ok(self.scheduler.add_request(request)?)
    }

    /// Stops a request; its blocks return to the pool. `None` if it is unknown or finished.
    pub fn abort(&mut self, id: u64) -> Option<RequestUpdate> {
        self.scheduler.abort(id)
    }

    /// Runs one step: schedule, forward pass and sampling, post-process. Returns what happened
    /// to each request that ran (new tokens, finishes). Empty when there is nothing to do.
    pub async fn step(&mut self) -> Result<Vec<RequestUpdate>, EngineError> {
        let Some(step) = self.scheduler.schedule() else {
            return Ok(Vec::new());
        };
        let sampled = self.runner.step(&step.batch).await?;
        Ok(self.scheduler.update(step, &sampled))
    }

    pub fn has_unfinished(&self) -> bool {
        self.scheduler.has_unfinished()
    }

    pub fn stats(&self) -> SchedulerStats {
        self.scheduler.stats()
    }

    pub fn model_config(&self) -> &ModelConfig {
        &self.runner.config
    }

    /// The sizes the runner settled on (step tokens, sequences, KV blocks).
    pub fn runner_config(&self) -> RunnerConfig {
        self.runner.runner_config
    }

    /// Longest prompt plus output a request may have.
    pub fn max_len(&self) -> usize {
        self.scheduler.max_len()
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    pub fn runner(&mut self) -> &mut ModelRunner {
        &mut self.runner
    }

    pub fn gpu(&self) -> &GpuContext {
        self.runner.context()
    }
}
