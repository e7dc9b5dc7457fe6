use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    hidden: u32,
    eps: f32,
    has_bias: u32,
    pad: u32,
}

/// `out[t, :] = layernorm(x[t, :]) * gain + bias` for every token of the step (Cohere's
/// without a bias, StableLM's with).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (hidden, eps): (usize, f32),
    x: &wgpu::Buffer,
    gain: &wgpu::Buffer,
    bias: Option<&wgpu::Buffer>,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "layer_norm",
        &Params {
            hidden: hidden as u32,
            eps,
            has_bias: bias.is_some().into(),
            pad: 0,
        },
    );
    let none = ctx.placeholder(16);
    Launch::new(
        &ctx.device,
        kernels.get("layer_norm"),
        &[step, &p, x, gain, out, bias.unwrap_or(&none)],
        Grid::Tokens { per: 1, y: 1 },
    )
}
