use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    hidden: u32,
    eps: f32,
    pad: [u32; 2],
}

/// `out[s, :] = rmsnorm(x[rows[s], :]) * gain` for the sampled rows.
#[allow(clippy::too_many_arguments)]
pub fn gather_rmsnorm(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (hidden, eps): (usize, f32),
    rows: &wgpu::Buffer,
    x: &wgpu::Buffer,
    gain: &wgpu::Buffer,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "gather_rmsnorm",
        &Params {
            hidden: hidden as u32,
            eps,
            pad: [0; 2],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("gather_rmsnorm"),
        &[step, &p, rows, x, gain, out],
        Grid::Samples { per: 1, y: 1 },
    )
}
