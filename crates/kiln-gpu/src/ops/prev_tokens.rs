//! The launch that puts the previous step's sampled tokens into this step's inputs
//! (`shaders/prev_tokens.wgsl`; [`kiln_core::PrevToken`]).

use bytemuck::{Pod, Zeroable};

use super::SAMPLE_OUT_STRIDE;
use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    out_stride: u32,
    pad: [u32; 3],
}

/// `token_ids[index] = sample_out[row].id` for each `(index, row)` pair of `prev`, one
/// workgroup (a step has at most one pair per sequence).
pub fn prev_tokens(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    prev: &wgpu::Buffer,
    sample_out: &wgpu::Buffer,
    token_ids: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "prev_tokens",
        &Params {
            out_stride: SAMPLE_OUT_STRIDE as u32,
            pad: [0; 3],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("prev_tokens"),
        &[step, &p, prev, sample_out, token_ids],
        Grid::Fixed([1, 1, 1]),
    )
}
