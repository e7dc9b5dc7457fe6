//! One serving step: schedule, submit, read back, post-process, with consecutive steps
//! overlapped.
//!
//! Without overlap a step is `schedule`, the forward pass and sampling, then `update`, and the
//! GPU idles while the host reads the tokens back, applies them and builds the next step. With
//! overlap ([`crate::EngineConfig::overlap`]: on by default, except on CPU-backed adapters,
//! where the device shares the host's cores and it measured slower) each call to [`Engine::step`]
//! schedules and submits the *next* step before it waits for the current one: the scheduler
//! commits a step as soon as it is submitted (every request advanced, each sampled one given a
//! placeholder token; `kiln-scheduler`'s `scheduler/overlap.rs`), so the next step's decodes
//! can be built at once, and the GPU takes their input tokens from the current step's sampler
//! output itself. The host's share of a step (reading back, detokenizing downstream,
//! scheduling, uploading, recording) then runs while the GPU computes.
//!
//! Penalties count the pending token in the sampler itself. A next step with grammar-constrained
//! rows has its forward pass submitted ahead and its sampling after the current step's tokens
//! are read back and fed to the matchers (the masks depend on them). A step is not overlapped
//! when it moves blocks to the CPU tier (the next step might restore one before it lands). A
//! request that stops on a token costs one wasted row in the step after. Outputs are the same
//! with and without overlap (tested in `tests/tiny_model/overlap.rs` and `tests/constrained.rs`).

use std::collections::HashMap;

use kiln_core::{SampledToken, StepBatch, TokenMask};
use kiln_gpu::ops::NO_TOKEN;
use kiln_gpu::{ForwardSubmitted, GpuError, SubmittedStep};
use kiln_scheduler::{FinishReason, RequestUpdate, ScheduledStep};

use crate::{Constraint, Engine, EngineError};

enum Submission {
    /// Forward pass and sampling.
    Whole(SubmittedStep),
    /// The forward pass of a step with constrained rows, submitted ahead: its masks wait for
    /// the previous step's tokens.
    Forward(ForwardSubmitted),
}

/// A step scheduled and submitted, whose tokens have not been read back.
pub(crate) struct Launched {
    step: ScheduledStep,
    /// Ids of its sampled requests, in batch order, one per sampler row.
    sampled_ids: Vec<u64>,
    submitted: Submission,
    /// Requests whose grammar matcher failed while their masks were computed.
    mask_failures: Vec<(u64, String)>,
    /// Whether the next step may be scheduled and submitted before its tokens are read.
    overlappable: bool,
}

impl Launched {
    /// Whether it moves blocks to the CPU tier (their bytes land there when it ends).
    pub(crate) fn moves_to_cpu(&self) -> bool {
        !self.step.batch.swap_out.is_empty()
    }
}

impl Engine {
    /// Runs one step: schedule, forward pass and sampling, post-process. Returns what happened
    /// to each request that ran (new tokens, finishes). Empty when there is nothing to do.
    /// With overlap the step whose updates are returned was submitted by the previous call,
    /// or by this one, which leaves the next step running on the GPU.
    ///
    /// On a failed step its requests are removed ([`EngineError::StepFailed`] names them,
    /// with those of the step submitted after it, which read its outputs) and the engine stays
    /// usable; on [`EngineError::DeviceLost`] it must be rebuilt.
    pub async fn step(&mut self) -> Result<Vec<RequestUpdate>, EngineError> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let current = match self.in_flight.take() {
            Some(c) => c,
            None => match self.launch(false)? {
                Some(mut c) => {
                    self.scheduler.commit(&mut c.step);
                    c
                }
                None => return Ok(Vec::new()),
            },
        };
        // A decode that may guess its next tokens needs this step's tokens first.
        let next = if self.overlap && current.overlappable && !self.scheduler.speculating() {
            self.launch(true).unwrap_or_else(|e| {
                self.deferred = Some(e);
                None
            })
        } else {
            None
        };
        let expected = current.sampled_ids.len() + current.step.batch.num_scored();
        let Submission::Whole(submitted) = current.submitted else {
            unreachable!("a step in flight has its sampling submitted");
        };
        let result = self.runner.finish(submitted).await;
        let errors = self.runner.context().faults.take_errors();
        let reason = match result {
            Ok(_) if !errors.is_empty() => errors.join("; "),
            Ok(sampled) if sampled.len() != expected => format!(
                "the runner returned {} tokens for {} samples and {} scored rows",
                sampled.len(),
                current.sampled_ids.len(),
                current.step.batch.num_scored()
            ),
            Ok(sampled) => {
                let (ids, failures) = (&current.sampled_ids, current.mask_failures);
                let updates = self.update(current.step, ids, sampled, failures);
                if let Some(next) = next {
                    // Constrained rows are sampled now that their matchers have the tokens.
                    match self.submit_sampling(next) {
                        Ok(mut next) => {
                            self.num_overlapped += 1;
                            self.scheduler.commit(&mut next.step);
                            self.in_flight = Some(next);
                        }
                        Err(e) => self.deferred = Some(e),
                    }
                }
                return Ok(updates);
            }
            Err(e) => e.to_string(),
        };
        let mut steps = vec![current.step];
        steps.extend(next.map(|n| n.step));
        Err(self.fail(steps, reason))
    }

    /// Schedules a step and submits it; `None` when there is nothing to run. A step that
    /// cannot be submitted is undone and reported. `ahead`: the step before it is still
    /// unresolved, so constrained rows get their forward pass only.
    fn launch(&mut self, ahead: bool) -> Result<Option<Launched>, EngineError> {
        let Some(step) = self.scheduler.schedule() else {
            return Ok(None);
        };
        // Blocks the CPU tier dropped: their bytes are overwritten when this step ends.
        self.keep_spilled();
        self.num_steps += 1;
        // One per sampled row: a decode with guesses has a row for each.
        let sampled_ids: Vec<u64> = (step.seqs.iter().filter(|s| s.sampled))
            .flat_map(|s| std::iter::repeat_n(s.id, 1 + s.drafts))
            .collect();
        let mut mask_failures = Vec::new();
        let submitted = match self.write_lora_loads(&step.lora_loads) {
            Ok(()) => self.submit(&step.batch, &sampled_ids, &mut mask_failures, ahead),
            Err(e) => Err(e),
        };
        match submitted {
            Ok(submitted) => {
                let guesses = step.seqs.iter().any(|s| s.drafts > 0);
                let overlappable = step.batch.swap_out.is_empty() && !guesses;
                Ok(Some(Launched {
                    step,
                    sampled_ids,
                    submitted,
                    mask_failures,
                    overlappable,
                }))
            }
            Err(e) => Err(self.fail(vec![step], e.to_string())),
        }
    }

    /// Submits the forward pass and sampling. With constrained rows the masks are computed
    /// on the CPU while the GPU runs the forward pass (a matcher that fails there is recorded
    /// in `failed`), or later (`ahead`: only the forward pass is submitted).
    fn submit(
        &mut self,
        batch: &StepBatch,
        sampled_ids: &[u64],
        failed: &mut Vec<(u64, String)>,
        ahead: bool,
    ) -> Result<Submission, GpuError> {
        #[cfg(feature = "fault-injection")]
        match self.faults.at(self.num_steps) {
            Some(crate::fault::Injected::FailStep) => {
                return Err(GpuError::Device(format!(
                    "injected failure of step {}",
                    self.num_steps
                )));
            }
            Some(crate::fault::Injected::LoseDevice) => {
                let reason = format!("injected device loss at step {}", self.num_steps);
                self.runner.context().faults.mark_lost(reason.clone());
                return Err(GpuError::Device(reason));
            }
            None => {}
        }
        if !sampled_ids
            .iter()
            .any(|id| self.constraints.contains_key(id))
        {
            return Ok(Submission::Whole(self.runner.submit(batch, None)?));
        }
        if ahead {
            return Ok(Submission::Forward(self.runner.submit_forward(batch)?));
        }
        let constraints = &mut self.constraints;
        let mut masks = || masks(constraints, sampled_ids, failed);
        Ok(Submission::Whole(
            self.runner.submit(batch, Some(&mut masks))?,
        ))
    }

    /// Submits the sampling of a step whose forward pass went ahead; a step whose sampling
    /// cannot be submitted is undone and reported.
    fn submit_sampling(&mut self, mut l: Launched) -> Result<Launched, EngineError> {
        if let Submission::Forward(forward) = l.submitted {
            let m = masks(&mut self.constraints, &l.sampled_ids, &mut l.mask_failures);
            match self.runner.submit_sampling(forward, m) {
                Ok(s) => l.submitted = Submission::Whole(s),
                Err(e) => return Err(self.fail(vec![l.step], e.to_string())),
            }
        }
        Ok(l)
    }

    /// Removes the requests of `steps` (which failed) and says why.
    fn fail(&mut self, steps: Vec<ScheduledStep>, reason: String) -> EngineError {
        let lost = self.runner.context().faults.lost();
        let mut failed = Vec::new();
        for step in steps {
            failed.extend(self.scheduler.fail_step(step));
        }
        for id in &failed {
            self.constraints.remove(id);
        }
        match lost {
            Some(reason) => EngineError::DeviceLost { failed, reason },
            None => EngineError::StepFailed { failed, reason },
        }
    }

    /// Feeds the sampled tokens to the matchers of constrained rows, then to the scheduler.
    /// A row whose matcher failed is aborted (its token not appended); a matcher that can take
    /// no more tokens ends its sequence as EOS would.
    fn update(
        &mut self,
        step: ScheduledStep,
        sampled_ids: &[u64],
        mut sampled: Vec<SampledToken>,
        mut failed: Vec<(u64, String)>,
    ) -> Vec<RequestUpdate> {
        if self.constraints.is_empty() {
            return self.scheduler.resolve(step, &sampled);
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
        let mut updates = self.scheduler.resolve(step, &sampled);
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
}

/// The token masks of a step's sampled rows (`None`: unconstrained). A matcher that fails
/// allows nothing, and is recorded in `failed`.
fn masks(
    constraints: &mut HashMap<u64, Constraint>,
    sampled_ids: &[u64],
    failed: &mut Vec<(u64, String)>,
) -> Vec<Option<TokenMask>> {
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
}
