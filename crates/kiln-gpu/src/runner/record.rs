//! Recording a step: the batch uploaded, then its block copies and every launch of the forward
//! pass (and sampling) in order into one command encoder; and the pass that returns logits
//! instead of sampling (tests, scoring).

use kiln_core::StepBatch;

use super::{ModelRunner, profile};
use crate::kv_cache::PendingSwapOut;
use crate::{GpuError, Recorded};

impl ModelRunner {
    /// Records the swaps and the forward pass of `batch`, sampling if `sample` is set.
    pub(super) fn record(
        &self,
        batch: &StepBatch,
        sample: bool,
    ) -> Result<(wgpu::CommandEncoder, Option<PendingSwapOut>, u32), GpuError> {
        if let Some(p) = batch
            .positions
            .iter()
            .find(|&&p| p as usize >= self.runner_config.max_model_len)
        {
            return Err(GpuError::Batch(format!(
                "position {p} is past the longest sequence, {}",
                self.runner_config.max_model_len
            )));
        }
        if let Some(l) =
            (batch.seqs.iter()).find_map(|s| s.lora.filter(|&l| l as usize >= self.lora_slots))
        {
            return Err(GpuError::Batch(format!(
                "a sequence runs through LoRA adapter {l}; the runner holds {}",
                self.lora_slots
            )));
        }
        let up = self.inputs.upload(&self.ctx, batch)?;
        let counts = up.counts;
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        let pending =
            self.kv
                .record_swaps(&self.ctx, &mut encoder, &batch.swap_out, &batch.swap_in)?;
        let (t, s) = (counts.num_tokens, counts.num_samples);
        if t > 0 {
            let mut units: Vec<&dyn Recorded> = Vec::new();
            if counts.num_prev > 0 {
                units.push(&self.prev_tokens);
            }
            if up.table_runs > 0 {
                units.push(&self.table_writes);
            }
            if up.penalty_runs > 0 {
                units.push(&self.penalty_writes);
            }
            units.extend(self.embed.iter().map(|l| l as &dyn Recorded));
            for layer in &self.layers {
                units.extend(layer.stages(up.lora));
            }
            units.extend([&self.final_norm as &dyn Recorded, &self.lm_head]);
            if sample {
                units.push(&self.sample);
            }
            let n = match self.profiler.borrow_mut().as_mut() {
                Some(p) => p.record(&mut encoder, &units, t, s),
                None => profile::record_in_one_pass(&mut encoder, &units, t, s),
            };
            self.dispatches.set(n);
        }
        Ok((encoder, pending, s))
    }

    /// The host's share of a step alone: the batch uploaded and the forward pass and sampling
    /// recorded, nothing submitted (for measuring the CPU time a step costs).
    pub fn encode_step(&self, batch: &StepBatch) -> Result<wgpu::CommandBuffer, GpuError> {
        Ok(self.record(batch, true)?.0.finish())
    }

    /// Compute dispatches the last step's forward pass recorded (sampling included; a separate
    /// masked sampling pass not counted).
    pub fn last_dispatches(&self) -> u32 {
        self.dispatches.get()
    }

    /// Runs `batch` without sampling and returns the logits of each sampled row (for tests and
    /// for scoring). Block copies and cache writes happen as in [`Self::step`].
    pub async fn logits(&mut self, batch: &StepBatch) -> Result<Vec<Vec<f32>>, GpuError> {
        let (encoder, pending, s) = self.record(batch, false)?;
        self.ctx.queue.submit([encoder.finish()]);
        if let Some(p) = pending {
            self.kv.finish_swap_out(&self.ctx, p).await?;
        }
        self.collect_profile().await?;
        let v = self.config.vocab_size;
        let data = self
            .ctx
            .read(&self.logits, 0, (s as usize * v * 4) as u64)
            .await?;
        Ok(bytemuck::cast_slice::<u8, f32>(&data)
            .chunks(v)
            .map(<[f32]>::to_vec)
            .collect())
    }
}
