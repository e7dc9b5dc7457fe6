use bytemuck::{Pod, Zeroable};
use kiln_core::SampleSpec;

use crate::{GpuContext, Grid, Kernels, Launch};

/// u32 words per sampled row in the output: id, logprob, then 20 (id, logprob) pairs.
pub const SAMPLE_OUT_STRIDE: usize = 42;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    vocab: u32,
    out_stride: u32,
    pad: [u32; 2],
}

/// Twin of the WGSL `Sampling` struct: one per sampled row.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct SampleUniform {
    pub temperature: f32,
    pub top_k: u32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub top_logprobs: u32,
    pub seed_lo: u32,
    pub seed_hi: u32,
    pub draw_index: u32,
    pub penalty_start: u32,
    pub penalty_count: u32,
    pub pad: [u32; 3],
}

impl SampleUniform {
    /// Packs `spec`, whose penalty tokens start at `penalty_start` of the penalty buffer.
    pub fn new(spec: &SampleSpec, penalty_start: u32) -> Self {
        let p = &spec.params;
        Self {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            repetition_penalty: p.repetition_penalty,
            presence_penalty: p.presence_penalty,
            frequency_penalty: p.frequency_penalty,
            top_logprobs: p.top_logprobs.min(20),
            seed_lo: spec.seed as u32,
            seed_hi: (spec.seed >> 32) as u32,
            draw_index: spec.draw_index,
            penalty_start,
            penalty_count: if p.has_penalties() { spec.penalty_tokens.len() as u32 } else { 0 },
            pad: [0; 3],
        }
    }
}

/// Samples one token per row of `logits` (modified in place).
pub fn sample(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    vocab: usize,
    sampling: &wgpu::Buffer,
    penalties: &wgpu::Buffer,
    logits: &wgpu::Buffer,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "sample",
        &Params { vocab: vocab as u32, out_stride: SAMPLE_OUT_STRIDE as u32, pad: [0; 2] },
    );
    Launch::new(&ctx.device, kernels.get("sample"), &[step, &p, sampling, penalties, logits, out], Grid::Samples { per: 1, y: 1 })
}
