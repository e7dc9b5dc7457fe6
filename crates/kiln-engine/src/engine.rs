//! The engine: a [`Scheduler`] and a [`ModelRunner`] sized for each other, plus the
//! grammar matchers of constrained requests.
//!
//! The scheduler learns every capacity of the runner (step tokens, sequences, penalty
//! entries; block tables follow from `max_model_len`), so it never schedules a step that
//! cannot run. A step that fails anyway is contained: its requests are removed and reported
//! in [`EngineError::StepFailed`], and the engine goes on with the others; a lost device is
//! reported as [`EngineError::DeviceLost`] (the caller rebuilds the engine).

use std::collections::HashMap;

use kiln_core::{BLOCK_SIZE, TokenMask};
use kiln_gpu::ops::NO_TOKEN;
use kiln_gpu::{
    GpuContext, KernelFamily, KvDtype, KvLayout, ModelRunner, RunnerConfig, WeightStorage,
};
use kiln_model::{ModelConfig, Weights};
use kiln_scheduler::{
    FinishReason, Request, RequestUpdate, Scheduler, SchedulerConfig, SchedulerStats,
};

use crate::{Constraint, EngineError};

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
    /// Longest sequence; `None` takes the model's context length, or what the KV pool holds
    /// if that is less. A value above either is an error, never shrunk.
    pub max_model_len: Option<usize>,
    /// The matmul and attention kernel family (`Auto`: by device type).
    pub kernels: KernelFamily,
    /// The KV cache's element type (f16 by default: twice the tokens of f32).
    pub kv_dtype: KvDtype,
    /// Whether quantized matrices stay quantized on the GPU (`Auto`: with the GPU family).
    pub weights: WeightStorage,
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
            weights: WeightStorage::Quantized,
        }
    }
}

pub struct Engine {
    scheduler: Scheduler,
    runner: ModelRunner,
    /// Steps run since the engine was built.
    num_steps: u64,
    #[cfg(feature = "fault-injection")]
    faults: crate::FaultPlan,
    /// Matchers of the constrained requests still running.
    constraints: HashMap<u64, Constraint>,
    /// Requests failed by their matcher since the last [`Engine::take_failures`].
    failures: Vec<(u64, String)>,
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
        let model_len = config.max_position_embeddings;
        if let Some(m) = ec.max_model_len
            && m > model_len
        {
            return Err(EngineError::Config(format!(
                "max_model_len {m} exceeds the model's context length of {model_len} tokens"
            )));
        }
        let layout = KvLayout::for_model(config, ec.kv_dtype);
        let num_blocks = match ec.kv {
            KvSize::Blocks(n) => n,
            KvSize::Bytes(b) => layout
                .blocks_in(b)
                .min(layout.max_blocks(ctx.max_binding())),
        };
        if num_blocks == 0 {
            return Err(EngineError::Config(
                "the KV cache budget is smaller than one block".into(),
            ));
        }
        let pool_tokens = num_blocks * BLOCK_SIZE;
        let limits = SchedulerConfig {
            max_num_batched_tokens: ec.max_num_batched_tokens,
            num_gpu_blocks: num_blocks,
            max_model_len: ec.max_model_len.unwrap_or(model_len),
            sliding_window: config.every_layer_window(),
            ..SchedulerConfig::default()
        };
        let max_model_len = limits.max_len();
        if let Some(m) = ec.max_model_len
            && m > max_model_len
        {
            return Err(EngineError::Config(format!(
                "max_model_len {m} exceeds what the KV pool holds: {num_blocks} blocks of {BLOCK_SIZE} tokens = {pool_tokens} tokens; give the KV cache more memory or lower max_model_len"
            )));
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
                weights: ec.weights,
            },
            progress,
        )?;
        let rc = runner.runner_config;
        let cap = runner.step_capacity();
        // The runner may have lowered the step budget; that only loosens `limits.max_len()`.
        let scheduler = Scheduler::new(SchedulerConfig {
            max_penalty_entries: cap.penalty_tokens,
            max_sampler_rows: cap.seqs,
            max_num_batched_tokens: rc.max_tokens,
            max_num_seqs: rc.max_seqs,
            num_cpu_blocks,
            enable_prefix_caching: ec.enable_prefix_caching,
            max_model_len,
            ..limits
        });
        Ok(Self {
            scheduler,
            runner,
            num_steps: 0,
            #[cfg(feature = "fault-injection")]
            faults: Default::default(),
            constraints: HashMap::new(),
            failures: Vec::new(),
        })
    }

    pub fn add_request(&mut self, request: Request) -> Result<(), EngineError> {
        Ok(self.scheduler.add_request(request)?)
    }

    /// Adds a request whose output `constraint` governs: every token is sampled under the
    /// matcher's mask and fed back to it.
    pub fn add_constrained_request(
        &mut self,
        request: Request,
        constraint: Constraint,
    ) -> Result<(), EngineError> {
        let id = request.id;
        self.scheduler.add_request(request)?;
        self.constraints.insert(id, constraint);
        Ok(())
    }

    /// Requests that failed because their grammar matcher did (an error, or no allowed token),
    /// with the reason; each also got a final update with `FinishReason::Abort`.
    pub fn take_failures(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.failures)
    }

    /// Stops a request; its blocks return to the pool. `None` if it is unknown or finished.
    pub fn abort(&mut self, id: u64) -> Option<RequestUpdate> {
        self.constraints.remove(&id);
        self.scheduler.abort(id)
    }

    /// Runs one step: schedule, forward pass and sampling, post-process. Returns what happened
    /// to each request that ran (new tokens, finishes). Empty when there is nothing to do.
    ///
    /// On a failed step its requests are removed ([`EngineError::StepFailed`] names them) and
    /// the engine stays usable; on [`EngineError::DeviceLost`] it must be rebuilt.
    pub async fn step(&mut self) -> Result<Vec<RequestUpdate>, EngineError> {
        let Some(step) = self.scheduler.schedule() else {
            return Ok(Vec::new());
        };
        self.num_steps += 1;
        let sampled_ids: Vec<u64> = step
            .seqs
            .iter()
            .filter(|s| s.sampled)
            .map(|s| s.id)
            .collect();
        let mut mask_failures = Vec::new();
        let result = self
            .run(&step.batch, &sampled_ids, &mut mask_failures)
            .await;
        let faults = &self.runner.context().faults;
        let mut reason = match result {
            Ok(sampled) => {
                let errors = faults.take_errors();
                if !errors.is_empty() {
                    errors.join("; ")
                } else if sampled.len() != sampled_ids.len() + step.batch.num_scored() {
                    format!(
                        "the runner returned {} tokens for {} samples and {} scored rows",
                        sampled.len(),
                        sampled_ids.len(),
                        step.batch.num_scored()
                    )
                } else {
                    return Ok(self.update(step, &sampled_ids, sampled, mask_failures));
                }
            }
            Err(e) => e.to_string(),
        };
        let lost = faults.lost();
        let failed = self.scheduler.fail_step(step);
        for id in &failed {
            self.constraints.remove(id);
        }
        if let Some(lost) = lost {
            reason = lost;
            return Err(EngineError::DeviceLost { failed, reason });
        }
        Err(EngineError::StepFailed { failed, reason })
    }

    /// The forward pass and sampling. With constrained rows the masks are computed on the CPU
    /// while the GPU runs the forward pass; a matcher that fails there is recorded in `failed`.
    async fn run(
        &mut self,
        batch: &kiln_core::StepBatch,
        sampled_ids: &[u64],
        failed: &mut Vec<(u64, String)>,
    ) -> Result<Vec<kiln_core::SampledToken>, kiln_gpu::GpuError> {
        #[cfg(feature = "fault-injection")]
        match self.faults.at(self.num_steps) {
            Some(crate::fault::Injected::FailStep) => {
                return Err(kiln_gpu::GpuError::Device(format!(
                    "injected failure of step {}",
                    self.num_steps
                )));
            }
            Some(crate::fault::Injected::LoseDevice) => {
                let reason = format!("injected device loss at step {}", self.num_steps);
                self.runner.context().faults.mark_lost(reason.clone());
                return Err(kiln_gpu::GpuError::Device(reason));
            }
            None => {}
        }
        if !sampled_ids
            .iter()
            .any(|id| self.constraints.contains_key(id))
        {
            return self.runner.step(batch).await;
        }
        let constraints = &mut self.constraints;
        let mut masks = || -> Vec<Option<TokenMask>> {
            sampled_ids
                .iter()
                .map(|id| {
                    let c = constraints.get_mut(id)?;
                    Some(c.mask().unwrap_or_else(|e| {
                        failed.push((*id, format!("the output constraint failed: {e}")));
                        vec![0; c.mask_len()]
                    }))
                })
                .collect()
        };
        self.runner.step_with_masks(batch, &mut masks).await
    }

    /// Feeds the sampled tokens to the matchers of constrained rows, then to the scheduler.
    /// A row whose matcher failed is aborted (its token not appended); a matcher that can take
    /// no more tokens ends its sequence as EOS would.
    fn update(
        &mut self,
        step: kiln_scheduler::ScheduledStep,
        sampled_ids: &[u64],
        mut sampled: Vec<kiln_core::SampledToken>,
        mut failed: Vec<(u64, String)>,
    ) -> Vec<RequestUpdate> {
        if self.constraints.is_empty() {
            return self.scheduler.update(step, &sampled);
        }
        let mut complete = Vec::new();
        for (id, t) in sampled_ids.iter().zip(&mut sampled) {
            let Some(c) = self.constraints.get_mut(id) else {
                continue;
            };
            if failed.iter().any(|(f, _)| f == id) {
            } else if t.token_id == NO_TOKEN {
                failed.push((
                    *id,
                    "no token the output constraint allows has a finite logit".into(),
                ));
            } else if let Err(e) = c.consume(t.token_id) {
                failed.push((
                    *id,
                    format!("the output constraint rejected token {}: {e}", t.token_id),
                ));
            } else {
                if c.is_stopped() {
                    complete.push(*id);
                }
                continue;
            }
            t.token_id = 0;
        }
        let mut updates = self.scheduler.update(step, &sampled);
        for (id, _) in &failed {
            self.constraints.remove(id);
            self.scheduler.abort(*id);
            if let Some(u) = updates.iter_mut().find(|u| u.id == *id) {
                u.token = None;
                u.finished = Some(FinishReason::Abort);
            }
        }
        for id in complete {
            if let Some(u) = updates
                .iter_mut()
                .find(|u| u.id == id && u.finished.is_none())
            {
                self.scheduler.abort(id);
                u.finished = Some(FinishReason::Stop);
            }
        }
        for u in &updates {
            if u.finished.is_some() {
                self.constraints.remove(&u.id);
            }
        }
        self.failures.extend(failed);
        updates
    }

    /// Steps run since the engine was built.
    pub fn num_steps(&self) -> u64 {
        self.num_steps
    }

    /// Why the device was lost, if it was: the engine cannot run again.
    pub fn device_lost(&self) -> Option<String> {
        self.runner.context().faults.lost()
    }

    /// Makes the steps of `plan` fail (tests only).
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_plan(&mut self, plan: crate::FaultPlan) {
        self.faults = plan;
    }

    pub fn has_unfinished(&self) -> bool {
        self.scheduler.has_unfinished()
    }

    /// Starts recording the prefix cache's KV events (the first is `AllBlocksCleared`).
    pub fn enable_kv_events(&mut self) {
        self.scheduler.enable_kv_events();
    }

    /// KV events since the last call; empty unless enabled.
    pub fn take_kv_events(&mut self) -> Vec<kiln_scheduler::KvEvent> {
        self.scheduler.take_kv_events()
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

    pub(crate) fn parts(&mut self) -> (&mut Scheduler, &mut ModelRunner) {
        (&mut self.scheduler, &mut self.runner)
    }

    /// The KV cache's layout (element type, layers, KV heads, head size).
    pub fn kv_layout(&self) -> KvLayout {
        self.runner.kv.layout
    }
}
