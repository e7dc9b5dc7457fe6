//! A step in two halves: [`ModelRunner::submit`] uploads, records and submits it;
//! [`ModelRunner::finish`] waits for it and reads its sampler output back. Between the two the
//! next step may be submitted: its sampler output goes to the other of two readback buffers,
//! and its inputs may take tokens from this step's output on the GPU.

use kiln_core::{SampledToken, StepBatch, TokenMask, mask_words};

use super::ModelRunner;
use crate::kv_cache::PendingSwapOut;
use crate::ops::{self, SAMPLE_OUT_STRIDE};
use crate::{GpuError, Recorded};

/// A step submitted by [`ModelRunner::submit`], to be read back by [`ModelRunner::finish`].
pub struct SubmittedStep {
    pending: Option<PendingSwapOut>,
    /// The readback buffer its sampler output is copied to, by `submission`.
    readback: usize,
    submission: wgpu::SubmissionIndex,
    /// What each sampler row reports (`ops::sampler_rows`).
    rows: Vec<(u32, bool)>,
}

/// A step whose forward pass is submitted and whose sampling waits for its token masks
/// ([`ModelRunner::submit_forward`]).
pub struct ForwardSubmitted {
    pending: Option<PendingSwapOut>,
    /// Sampler rows, and the step's tokens.
    samples: u32,
    tokens: u32,
    rows: Vec<(u32, bool)>,
}

impl ModelRunner {
    /// Runs one step: the batch's block copies, one forward pass and sampling. Returns one
    /// token per sequence with a `sample` spec, in batch order, then one per scored prompt row.
    pub async fn step(&mut self, batch: &StepBatch) -> Result<Vec<SampledToken>, GpuError> {
        let submitted = self.submit(batch, None)?;
        self.finish(submitted).await
    }

    /// [`Self::step`] with token masks: the forward pass is submitted first, then `masks` is
    /// called (the CPU computes the masks while the GPU runs the forward pass), and returns one
    /// entry per sampled row (`None`: unconstrained); then the sampling pass runs with them.
    /// A row whose mask (or logits) leaves no token gets `token_id` [`ops::NO_TOKEN`].
    pub async fn step_with_masks(
        &mut self,
        batch: &StepBatch,
        masks: &mut dyn FnMut() -> Vec<Option<TokenMask>>,
    ) -> Result<Vec<SampledToken>, GpuError> {
        let submitted = self.submit(batch, Some(masks))?;
        self.finish(submitted).await
    }

    /// The first half of [`Self::step`] (or [`Self::step_with_masks`]): the step is uploaded,
    /// recorded and submitted, and nothing is read back. The next step may be submitted
    /// before this one is finished ([`Self::finish`]); its inputs may then take tokens from
    /// this one's output on the GPU ([`kiln_core::PrevToken`]). At most two steps may be
    /// submitted and not finished, and only the later of them may have block copies to the
    /// CPU tier.
    pub fn submit(
        &mut self,
        batch: &StepBatch,
        masks: Option<&mut dyn FnMut() -> Vec<Option<TokenMask>>>,
    ) -> Result<SubmittedStep, GpuError> {
        match masks {
            None => {
                let (encoder, pending, s) = self.record(batch, true)?;
                Ok(self.submit_readback(encoder, pending, s, ops::sampler_rows(batch)))
            }
            Some(masks) => {
                let forward = self.submit_forward(batch)?;
                self.submit_sampling(forward, masks())
            }
        }
    }

    /// A step with token masks in two parts: the forward pass now, the sampling with the
    /// masks later ([`Self::submit_sampling`]), so that the masks may depend on what the
    /// host learns in between (the previous step's tokens).
    pub fn submit_forward(&mut self, batch: &StepBatch) -> Result<ForwardSubmitted, GpuError> {
        let (encoder, pending, samples) = self.record(batch, false)?;
        self.ctx.queue.submit([encoder.finish()]);
        Ok(ForwardSubmitted {
            pending,
            samples,
            tokens: batch.num_tokens() as u32,
            rows: ops::sampler_rows(batch),
        })
    }

    /// Samples the step of `forward` under `masks`, one per sampled row (`None`:
    /// unconstrained). Nothing may be submitted between the two parts.
    pub fn submit_sampling(
        &mut self,
        forward: ForwardSubmitted,
        masks: Vec<Option<TokenMask>>,
    ) -> Result<SubmittedStep, GpuError> {
        let sampled = forward.rows.iter().filter(|r| !r.1).count();
        self.write_masks(sampled, masks)?;
        let s = forward.samples;
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        if s > 0 {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("sample"),
                timestamp_writes: None,
            });
            Recorded::record(&self.sample, &mut pass, forward.tokens, s);
        }
        Ok(self.submit_readback(encoder, forward.pending, s, forward.rows))
    }

    /// Copies `s` sampler rows to the next readback buffer and submits `encoder`.
    fn submit_readback(
        &mut self,
        mut encoder: wgpu::CommandEncoder,
        pending: Option<PendingSwapOut>,
        s: u32,
        rows: Vec<(u32, bool)>,
    ) -> SubmittedStep {
        let readback = self.next_readback;
        self.next_readback = 1 - readback;
        let bytes = (s as usize * SAMPLE_OUT_STRIDE * 4) as u64;
        if bytes > 0 {
            encoder.copy_buffer_to_buffer(&self.sample_out, 0, &self.readback[readback], 0, bytes);
        }
        let submission = self.ctx.queue.submit([encoder.finish()]);
        SubmittedStep {
            pending,
            readback,
            submission,
            rows,
        }
    }

    /// The second half of [`Self::step`]: waits for the step and returns its tokens.
    pub async fn finish(&mut self, step: SubmittedStep) -> Result<Vec<SampledToken>, GpuError> {
        if let Some(p) = step.pending {
            self.kv.finish_swap_out(&self.ctx, p).await?;
        }
        if step.rows.is_empty() {
            self.collect_profile().await?;
            return Ok(Vec::new());
        }
        let buffer = &self.readback[step.readback];
        let data = self
            .ctx
            .map_read_after(buffer, Some(step.submission))
            .await?;
        self.collect_profile().await?;
        Ok(ops::decode_sample_out(
            bytemuck::cast_slice(&data),
            &step.rows,
        ))
    }

    /// Writes the token masks of a step's `sampled` rows and points each constrained row at
    /// its mask.
    fn write_masks(
        &mut self,
        sampled: usize,
        masks: Vec<Option<TokenMask>>,
    ) -> Result<(), GpuError> {
        let words = mask_words(self.config.vocab_size);
        if masks.len() != sampled {
            return Err(GpuError::Batch(format!(
                "{} token masks for {sampled} sampled rows",
                masks.len()
            )));
        }
        let mut next = 0u32;
        for (row, m) in masks.iter().enumerate() {
            let Some(m) = m else { continue };
            if m.len() != words {
                return Err(GpuError::Batch(format!(
                    "row {row}: token mask of {} words, the vocabulary needs {words}",
                    m.len()
                )));
            }
            self.ctx.write(
                &self.masks,
                next as u64 * words as u64 * 4,
                bytemuck::cast_slice(m),
            );
            self.inputs.set_mask_row(&self.ctx, row, next);
            next += 1;
        }
        Ok(())
    }
}
