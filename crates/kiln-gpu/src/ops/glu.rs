use bytemuck::{Pod, Zeroable};
use kiln_model::Activation;

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    inter: u32,
    /// `activation.wgsl`'s kind of gated activation.
    kind: u32,
    pad: [u32; 2],
}

/// `activation.wgsl`'s number for the gated activation `act`.
pub(super) fn gated_kind(act: Activation) -> u32 {
    match act {
        Activation::GeluTanh => 1,
        Activation::ClampedSwiglu => 2,
        Activation::Gelu => 3,
        Activation::Silu | Activation::Relu2 => 0,
    }
}

/// `out[t, i] = act(gu[t, i]) * gu[t, I + i]`.
pub fn glu(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (inter, act): (usize, Activation),
    gu: &wgpu::Buffer,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "glu",
        &Params {
            inter: inter as u32,
            kind: gated_kind(act),
            pad: [0; 2],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("glu"),
        &[step, &p, gu, out],
        Grid::Elements {
            width: inter as u32,
            per: 256,
        },
    )
}
