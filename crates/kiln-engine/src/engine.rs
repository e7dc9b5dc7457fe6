//! The engine: a [`Scheduler`] and a [`ModelRunner`] sized for each other, plus the
//! grammar matchers of constrained requests.

use std::collections::HashMap;

use kiln_core::TokenMask;
use kiln_gpu::ops::NO_TOKEN;
use kiln_gpu::{GpuContext, ModelRunner, RunnerConfig};
use kiln_model::{ModelConfig, Weights};
use kiln_scheduler::{FinishReason, Request, RequestUpdate, Scheduler, SchedulerConfig, SchedulerStats};

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
    /// Longest sequence; `None` takes the model's context length.
    pub max_model_len: Option<usize>,
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
        }
    }
}

pub struct Engine {
    scheduler: Scheduler,
    runner: ModelRunner,
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
        let max_model_len = ec.max_model_len.unwrap_or(config.max_position_embeddings).min(config.max_position_embeddings);
        let block_bytes = (kiln_core::BLOCK_SIZE * config.num_kv_heads * config.head_dim * 4) as u64;
        let per_block_all_layers = block_bytes * 2 * config.num_layers as u64;
        let max_blocks = (ctx.max_binding() / block_bytes) as usize;
        let num_blocks = match ec.kv {
            KvSize::Blocks(n) => n,
            KvSize::Bytes(b) => ((b / per_block_all_layers) as usize).min(max_blocks),
        };
        if num_blocks == 0 {
            return Err(EngineError::Config("the KV cache budget is smaller than one block".into()));
        }
        let num_cpu_blocks = (ec.cpu_kv_bytes / per_block_all_layers) as usize;
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
        Ok(Self { scheduler, runner, constraints: HashMap::new(), failures: Vec::new() })
    }

    pub fn add_request(&mut self, request: Request) -> Result<(), EngineError> {
        Ok(self.scheduler.add_request(request)?)
    }

    /// Adds a request whose output `constraint` governs: every token is sampled under the
    /// matcher's mask and fed back to it.
    pub fn add_constrained_request(&mut self, request: Request, constraint: Constraint) -> Result<(), EngineError> {
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
    pub async fn step(&mut self) -> Result<Vec<RequestUpdate>, EngineError> {
        let Some(step) = self.scheduler.schedule() else {
            return Ok(Vec::new());
        };
        let sampled_ids: Vec<u64> = step.seqs.iter().filter(|s| s.sampled).map(|s| s.id).collect();
        if !sampled_ids.iter().any(|id| self.constraints.contains_key(id)) {
            let sampled = self.runner.step(&step.batch).await?;
            return Ok(self.scheduler.update(step, &sampled));
        }
        // The masks are computed while the GPU runs the forward pass.
        let (constraints, failed) = (&mut self.constraints, &mut Vec::new());
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
        let mut sampled = self.runner.step_with_masks(&step.batch, &mut masks).await?;
        let mut failed = std::mem::take(failed);
        let mut complete = Vec::new();
        for (id, t) in sampled_ids.iter().zip(&mut sampled) {
            let Some(c) = self.constraints.get_mut(id) else { continue };
            if failed.iter().any(|(f, _)| f == id) {
            } else if t.token_id == NO_TOKEN {
                failed.push((*id, "no token the output constraint allows has a finite logit".into()));
            } else if let Err(e) = c.consume(t.token_id) {
                failed.push((*id, format!("the output constraint rejected token {}: {e}", t.token_id)));
            } else {
                if c.is_stopped() {
                    complete.push(*id);
                }
                continue;
            }
            // A failed row's token is not appended: the request is aborted below.
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
        // A matcher that can take no more tokens ends its sequence here (as EOS would).
        for id in complete {
            if let Some(u) = updates.iter_mut().find(|u| u.id == id && u.finished.is_none()) {
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
        Ok(updates)
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
