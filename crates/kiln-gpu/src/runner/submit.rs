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
    /// Sampler rows whose final hidden state is read back too.
    hidden_rows: Vec<u32>,
}

/// A step whose forward pass is submitted and whose sampling waits for its token masks
/// ([`ModelRunner::submit_forward`]).
pub struct ForwardSubmitted {
    pending: Option<PendingSwapOut>,
    /// Sampler rows, and the step's tokens.
    samples: u32,
    tokens: u32,
    rows: Vec<(u32, bool)>,
    hidden_rows: Vec<u32>,
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
                let rows = (ops::sampler_rows(batch), batch.hidden_rows.clone());
                self.submit_readback(encoder, pending, s, rows)
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
            hidden_rows: batch.hidden_rows.clone(),
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
        let rows = (forward.rows, forward.hidden_rows);
        self.submit_readback(encoder, forward.pending, s, rows)
    }

    /// Copies `s` sampler rows (and their hidden states, where `hidden_rows` asks for any) to
    /// the next readback buffers and submits `encoder`.
    fn submit_readback(
        &mut self,
        mut encoder: wgpu::CommandEncoder,
        pending: Option<PendingSwapOut>,
        s: u32,
        (rows, hidden_rows): (Vec<(u32, bool)>, Vec<u32>),
    ) -> Result<SubmittedStep, GpuError> {
        if let Some(&r) = hidden_rows.iter().find(|&&r| r >= s) {
            return Err(GpuError::Batch(format!(
                "hidden state of sampler row {r} asked for, the step has {s}"
            )));
        }
        let readback = self.next_readback;
        self.next_readback = 1 - readback;
        let bytes = (s as usize * SAMPLE_OUT_STRIDE * 4) as u64;
        if bytes > 0 {
            encoder.copy_buffer_to_buffer(&self.sample_out, 0, &self.readback[readback], 0, bytes);
        }
        if !hidden_rows.is_empty() {
            let hidden = self.hidden_readback()[readback].clone();
            let bytes = (s as usize * self.config.hidden_size * 4) as u64;
            encoder.copy_buffer_to_buffer(&self.normed, 0, &hidden, 0, bytes);
        }
        let submission = self.ctx.queue.submit([encoder.finish()]);
        Ok(SubmittedStep {
            pending,
            readback,
            submission,
            rows,
            hidden_rows,
        })
    }

    /// The two buffers hidden states are read back through, made on first use.
    fn hidden_readback(&mut self) -> &[wgpu::Buffer; 2] {
        let bytes = (self.runner_config.sampler_rows * self.config.hidden_size * 4) as u64;
        let device = &self.ctx.device;
        self.hidden_readback.get_or_insert_with(|| {
            [0, 1].map(|_| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("hidden readback"),
                    size: bytes,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
        })
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
            .map_read_after(buffer, Some(step.submission.clone()))
            .await?;
        let mut tokens = ops::decode_sample_out(bytemuck::cast_slice(&data), &step.rows);
        if let Some(hidden) = self
            .hidden_readback
            .as_ref()
            .filter(|_| !step.hidden_rows.is_empty())
        {
            let data = (self.ctx)
                .map_read_after(&hidden[step.readback], Some(step.submission))
                .await?;
            let values: &[f32] = bytemuck::cast_slice(&data);
            let h = self.config.hidden_size;
            for &r in &step.hidden_rows {
                let r = r as usize;
                tokens[r].hidden = Some(values[r * h..(r + 1) * h].to_vec());
            }
        }
        self.collect_profile().await?;
        Ok(tokens)
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
