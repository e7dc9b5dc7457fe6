use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    hidden: u32,
    eps: f32,
    pad: [u32; 2],
}

/// `out[t, :] = layernorm(x[t, :]) * gain` for every token of the step (no bias: Cohere's).
pub fn layer_norm(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (hidden, eps): (usize, f32),
    x: &wgpu::Buffer,
    gain: &wgpu::Buffer,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "layer_norm",
        &Params {
            hidden: hidden as u32,
            eps,
            pad: [0; 2],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("layer_norm"),
        &[step, &p, x, gain, out],
        Grid::Tokens { per: 1, y: 1 },
    )
}
