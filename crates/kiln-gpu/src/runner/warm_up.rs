//! Warming a runner up before it serves: the costs a device defers to the first use of its
//! buffers and kernels are paid while the engine is built, not by the first request.
//!
//! wgpu hands out zeroed memory, and zeroes a buffer where a submission first uses it; for
//! the KV pool (most of the engine's memory) that is a clear of every byte, which on lavapipe
//! took 570 ms of the first step with a 1 GiB pool. Drivers may also finish preparing a
//! kernel, or map its memory, at its first dispatch. So the KV buffers are cleared here, and
//! one step of one token runs through every layer and the sampler (the kernels of steps of
//! more rows are not run: on lavapipe their first use measured a few milliseconds).
//!
//! The step writes the KV of position 0 of a sequence in block 0 and block-table row 0: both
//! free while the engine is new, and neither read by a request before it writes them itself
//! (a block reached through the prefix cache was written by the request that filled it; a
//! row's entries are written when a sequence is given the row, and the runner counts the row
//! empty again after the warm-up).

use kiln_core::{SampleSpec, SamplingParams, SeqInBatch, StepBatch};

use super::ModelRunner;
use crate::GpuError;

impl ModelRunner {
    /// Clears the KV pool and runs one step of one token, submitted without reading anything
    /// back; natively, returns once the device has finished them (in the browser they run
    /// ahead of whatever is submitted next).
    pub fn warm_up(&mut self) -> Result<(), GpuError> {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        for b in self.kv.k.iter().chain(&self.kv.v) {
            encoder.clear_buffer(b, 0, None);
        }
        self.ctx.queue.submit([encoder.finish()]);
        let step = self.encode_step(&one_token())?;
        let submission = self.ctx.queue.submit([step]);
        // No later step continues the warm-up's sequence: its row holds nothing for them.
        self.inputs.clear_tables();
        #[cfg(not(target_arch = "wasm32"))]
        self.ctx
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .map_err(|e| GpuError::Device(e.to_string()))?;
        #[cfg(target_arch = "wasm32")]
        let _ = submission;
        Ok(())
    }
}

/// Token 0 at position 0 of a sequence in block 0 of table row 0, sampled greedily.
fn one_token() -> StepBatch {
    StepBatch {
        token_ids: vec![0],
        positions: vec![0],
        slot_mapping: vec![0],
        seqs: vec![SeqInBatch {
            query_len: 1,
            context_len: 1,
            table_tail: vec![0],
            sample: Some(SampleSpec {
                params: SamplingParams::greedy(),
                seed: 0,
                draw_index: 0,
                penalties: Default::default(),
            }),
            ..SeqInBatch::default()
        }],
        ..StepBatch::default()
    }
}
