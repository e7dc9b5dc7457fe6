use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    hidden: u32,
    eps: f32,
    pad: [u32; 2],
}

/// `x[t, :] += rmsnorm(y[t, :]) * gain` for every token of the step.
pub fn residual_rmsnorm(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (hidden, eps): (usize, f32),
    y: &wgpu::Buffer,
    gain: &wgpu::Buffer,
    x: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "residual_rmsnorm",
        &Params {
            hidden: hidden as u32,
            eps,
            pad: [0; 2],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("residual_rmsnorm"),
        &[step, &p, y, gain, x],
        Grid::Tokens { per: 1, y: 1 },
    )
}
