//! The engine: a [`Scheduler`] and a [`ModelRunner`] sized for each other, plus the
//! grammar matchers of constrained requests.
//!
//! The scheduler learns every capacity of the runner (step tokens, sequences, penalty
//! entries; block tables follow from `max_model_len`), so it never schedules a step that
//! cannot run. A step that fails anyway is contained: its requests are removed and reported
//! in [`EngineError::StepFailed`], and the engine goes on with the others; a lost device is
//! reported as [`EngineError::DeviceLost`] (the caller rebuilds the engine).

use std::collections::HashMap;
use std::sync::Arc;

use kiln_core::{BLOCK_SIZE, PENALTY_PAGE};
use kiln_gpu::{
    GpuContext, KernelFamily, KvDtype, KvLayout, ModelRunner, RunnerConfig, WeightStorage,
};
use kiln_model::{LoraAdapter, ModelConfig, Weights};
use kiln_scheduler::{
    Request, RequestUpdate, Scheduler, SchedulerConfig, SchedulerStats, Speculation,
};

use crate::step::Launched;
use crate::{Constraint, EngineError, Overlap};

/// How large the GPU KV pool is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KvSize {
    Blocks(usize),
    Bytes(u64),
    /// This fraction (in (0, 1]) of the device's memory for the whole engine: the KV pool
    /// gets what the weights and the step's buffers leave (vLLM's
    /// `gpu_memory_utilization`). Only where the device reports its memory (Vulkan).
    DeviceShare(f64),
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
    /// Whether quantized matrices stay quantized on the GPU.
    pub weights: WeightStorage,
    /// Whether each step is scheduled and submitted while the one before it runs (`step.rs`);
    /// outputs are the same either way.
    pub overlap: Overlap,
    /// Speculative decoding by prompt lookup (`None`: off, the default): each decode carries
    /// up to that many guesses of its next tokens from its own history, and keeps those the
    /// model's draws confirm. Outputs are the same either way.
    pub speculation: Option<Speculation>,
    /// LoRA adapters requests may run through ([`kiln_scheduler::Request::lora`]: slots
    /// `0..` in this order), each checked against the model when it was read.
    pub lora: Vec<Arc<LoraAdapter>>,
    /// Room for adapters loaded while the engine runs ([`Engine::load_lora`]): every
    /// projection then has that many slots, of that rank (vLLM's `--max-loras` and
    /// `--max-lora-rank`), and any number of adapters may be loaded, each put into a slot
    /// while requests run through it (a step's requests use at most that many adapters).
    /// `None`: the adapters above only, each in its own slot.
    pub lora_capacity: Option<kiln_gpu::ops::LoraCapacity>,
    /// Most adapters whose values stay in host memory (vLLM's `--max-cpu-loras`): beyond it,
    /// those used least recently that no request needs let go of theirs, read again from
    /// their files when a request needs one (`lora.rs`); `None`: every adapter keeps them.
    pub max_cpu_loras: Option<usize>,
    /// Whether the KV pool is cleared and one prefill and one decode run while the engine is
    /// built (`kiln_gpu`'s `runner/warm_up.rs`), so that the first request does not pay the
    /// device's first use of its memory and kernels (on by default).
    pub warm_up: bool,
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
            overlap: Overlap::Auto,
            speculation: None,
            lora: Vec::new(),
            lora_capacity: None,
            max_cpu_loras: None,
            warm_up: true,
        }
    }
}

pub struct Engine {
    pub(crate) scheduler: Scheduler,
    pub(crate) runner: ModelRunner,
    /// Steps run since the engine was built.
    pub(crate) num_steps: u64,
    #[cfg(feature = "fault-injection")]
    pub(crate) faults: crate::FaultPlan,
    /// Matchers of the constrained requests still running.
    pub(crate) constraints: HashMap<u64, Constraint>,
    /// Requests failed by their matcher since the last [`Engine::take_failures`].
    pub(crate) failures: Vec<(u64, String)>,
    pub(crate) overlap: bool,
    /// The step submitted and committed whose tokens the next [`Engine::step`] reads.
    pub(crate) in_flight: Option<Launched>,
    /// The failure of a step submitted ahead, reported by the next [`Engine::step`].
    pub(crate) deferred: Option<EngineError>,
    /// Steps submitted while the step before them ran.
    pub(crate) num_overlapped: u64,
    /// Blocks the CPU tier dropped, with their bytes, while spilling is on (`transfer.rs`).
    pub(crate) spilled: Option<Vec<crate::SavedBlock>>,
    /// The LoRA adapters, by id (`lora.rs`; `None`: an id unloaded).
    pub(crate) lora: Vec<Option<Arc<LoraAdapter>>>,
    pub(crate) max_cpu_loras: Option<usize>,
    /// Adapter ids, the one requests used least recently first.
    pub(crate) lora_recent: Vec<u32>,
    /// Adapters read again from their files since start.
    pub(crate) lora_reads: u64,
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
        if let Some(s) = ec.speculation {
            s.validate().map_err(EngineError::Config)?;
        }
        let layout = KvLayout::for_model(config, ec.kv_dtype);
        let most = layout.max_blocks(ctx.max_binding());
        let (num_blocks, memory_budget) = match ec.kv {
            KvSize::Blocks(n) => (n, None),
            KvSize::Bytes(b) => (layout.blocks_in(b).min(most), None),
            KvSize::DeviceShare(f) => (most, Some(device_share(ctx, f)?)),
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
        // With room for adapters, those beyond its slots wait for one, as loaded ones do.
        let resident = (ec.lora_capacity).map_or(ec.lora.len(), |c| c.slots.min(ec.lora.len()));
        let mut runner = ModelRunner::with_lora(
            ctx,
            config,
            weights,
            RunnerConfig {
                max_tokens: ec.max_num_batched_tokens,
                max_seqs: ec.max_num_seqs,
                // Room for the guesses of up to 16 sequences' decodes beyond a row each.
                sampler_rows: ec.max_num_seqs
                    + ec.speculation
                        .map_or(0, |s| s.num_tokens * ec.max_num_seqs.min(16)),
                num_blocks,
                memory_budget,
                num_cpu_blocks,
                max_model_len,
                kernels: ec.kernels,
                kv_dtype: ec.kv_dtype,
                weights: ec.weights,
            },
            (&ec.lora[..resident], ec.lora_capacity),
            progress,
        )?;

        for a in &ec.lora[resident..] {
            runner
                .check_lora(a)
                .map_err(|e| EngineError::Config(format!("LoRA adapter `{}`: {e}", a.name)))?;
        }
        if ec.warm_up {
            runner.warm_up()?;
        }
        let rc = runner.runner_config;
        let cap = runner.step_capacity();
        // Under a memory budget the runner chose the pool; the longest sequence is what it
        // holds.
        let limits = SchedulerConfig {
            num_gpu_blocks: rc.num_blocks,
            ..limits
        };
        let max_model_len = max_model_len.min(limits.max_len());
        if let Some(m) = ec.max_model_len
            && m > max_model_len
        {
            return Err(EngineError::Config(format!(
                "max_model_len {m} exceeds what the KV pool holds: {} blocks of {BLOCK_SIZE} tokens = {} tokens; give the KV cache more memory or lower max_model_len",
                rc.num_blocks,
                rc.num_blocks * BLOCK_SIZE
            )));
        }
        // The runner may have lowered the step budget; that only loosens `limits.max_len()`.
        let scheduler = Scheduler::new(SchedulerConfig {
            max_penalty_entries: cap.penalty_pages * PENALTY_PAGE,
            max_sampler_rows: cap.rows,
            max_num_batched_tokens: rc.max_tokens,
            max_num_seqs: rc.max_seqs,
            num_cpu_blocks,
            enable_prefix_caching: ec.enable_prefix_caching,
            max_model_len,
            speculation: ec.speculation,
            lora_slots: runner.lora_slots().0,
            lora_resident: resident,
            lora_loads: runner.lora_slots().1,
            ..limits
        });
        if ec.lora_capacity.is_some_and(|c| c.slots == 0) {
            return Err(EngineError::Config(
                "room for LoRA adapters needs at least one slot (max_loras)".into(),
            ));
        }
        // The adapters listed first stay held where not all may.
        let lora_recent = (0..ec.lora.len() as u32).rev().collect();
        let lora: Vec<_> = ec.lora.into_iter().map(Some).collect();
        let mut engine = Self {
            scheduler,
            runner,
            num_steps: 0,
            #[cfg(feature = "fault-injection")]
            faults: Default::default(),
            constraints: HashMap::new(),
            failures: Vec::new(),
            overlap: ec.overlap.enabled(ctx.cpu_adapter()),
            in_flight: None,
            deferred: None,
            num_overlapped: 0,
            spilled: None,
            lora,
            max_cpu_loras: ec.max_cpu_loras,
            lora_recent,
            lora_reads: 0,
        };
        engine.trim_loras();
        Ok(engine)
    }

    /// Adds a request; one with a token filter is sampled under it.
    pub fn add_request(&mut self, request: Request) -> Result<(), EngineError> {
        if request.filter.is_empty() {
            let request = self.adapted(request)?;
            self.scheduler.add_request(request)?;
            self.trim_loras();
            return Ok(());
        }
        let unconstrained =
            Constraint::filter_only(Default::default(), self.runner.config.vocab_size);
        self.add_constrained_request(request, unconstrained)
    }

    /// Adds a request whose output `constraint` (and the request's token filter) governs:
    /// every token is sampled under the matcher's mask and fed back to it.
    pub fn add_constrained_request(
        &mut self,
        request: Request,
        constraint: Constraint,
    ) -> Result<(), EngineError> {
        let request = self.adapted(request)?;
        let (id, filter) = (request.id, request.filter.clone());
        // Its masks follow its tokens one at a time.
        let request = Request {
            speculative: false,
            ..request
        };
        self.scheduler.add_request(request)?;
        self.trim_loras();
        self.constraints.insert(id, constraint.with_filter(filter));
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

    /// Empties the prefix cache of every block no request holds, on the GPU and in the CPU
    /// tier (vLLM's `reset_prefix_cache`); returns the GPU and CPU blocks dropped. Blocks of
    /// running requests and pins stay cached.
    pub fn reset_prefix_cache(&mut self) -> (usize, usize) {
        self.scheduler.reset_prefix_cache()
    }

    /// Steps run since the engine was built.
    pub fn num_steps(&self) -> u64 {
        self.num_steps
    }

    /// Whether a step is submitted and committed, its tokens to be read by the next
    /// [`Self::step`] (which then makes progress even if it schedules nothing new).
    pub fn step_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Steps submitted while the step before them ran (with [`EngineConfig::overlap`]).
    pub fn num_overlapped_steps(&self) -> u64 {
        self.num_overlapped
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

    /// Whether a [`Self::step`] has anything to do (a request, a step in flight, a failure to
    /// report).
    pub fn has_unfinished(&self) -> bool {
        self.scheduler.has_unfinished() || self.in_flight.is_some() || self.deferred.is_some()
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
        SchedulerStats {
            lora_reads: self.lora_reads,
            ..self.scheduler.stats()
        }
    }

    pub fn model_config(&self) -> &ModelConfig {
        &self.runner.config
    }

    /// The sizes the runner settled on (step tokens, sequences, KV blocks).
    pub fn runner_config(&self) -> RunnerConfig {
        self.runner.runner_config
    }

    /// Bytes of device memory the engine's buffers take (weights, KV pool, step buffers).
    pub fn gpu_bytes(&self) -> u64 {
        self.runner.gpu_bytes
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

/// Bytes of `share` of the device's memory; an error where it is out of (0, 1], more than
/// the device has free, or the device does not report its memory.
fn device_share(ctx: &GpuContext, share: f64) -> Result<u64, EngineError> {
    if !(share > 0.0 && share <= 1.0) {
        return Err(EngineError::Config(format!(
            "the share of device memory must be in (0, 1], not {share}"
        )));
    }
    let memory = ctx.device_memory().ok_or_else(|| {
        EngineError::Config(format!(
            "{} ({:?}) does not report its memory to kiln (only Vulkan devices do); size the KV cache in bytes or blocks instead",
            ctx.info.name, ctx.info.backend
        ))
    })?;
    let bytes = (memory.total as f64 * share) as u64;
    match memory.free {
        Some(free) if free < bytes => Err(EngineError::Config(format!(
            "{share} of the device's {} bytes is {bytes} bytes, more than the {free} it has free (other processes hold the rest); lower the share",
            memory.total
        ))),
        _ => Ok(bytes),
    }
}
