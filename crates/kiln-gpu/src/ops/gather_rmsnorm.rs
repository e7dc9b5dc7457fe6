use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    hidden: u32,
    eps: f32,
    centered: u32,
    has_bias: u32,
}

/// `out[s, :] = rmsnorm(x[rows[s], :]) * gain` for the sampled rows; with `centered`, a
/// LayerNorm in place of the RMSNorm, plus `bias` where there is one.
#[allow(clippy::too_many_arguments)]
pub fn gather_rmsnorm(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (hidden, eps, centered): (usize, f32, bool),
    rows: &wgpu::Buffer,
    x: &wgpu::Buffer,
    gain: &wgpu::Buffer,
    bias: Option<&wgpu::Buffer>,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "gather_rmsnorm",
        &Params {
            hidden: hidden as u32,
            eps,
            centered: centered.into(),
            has_bias: bias.is_some().into(),
        },
    );
    let none = ctx.placeholder(16);
    Launch::new(
        &ctx.device,
        kernels.get("gather_rmsnorm"),
        &[step, &p, rows, x, gain, out, bias.unwrap_or(&none)],
        Grid::Samples { per: 1, y: 1 },
    )
}
