use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    inter: u32,
    pad: [u32; 3],
}

/// `out[t, i] = silu(gu[t, i]) * gu[t, I + i]`.
pub fn silu_mul(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    inter: usize,
    gu: &wgpu::Buffer,
    out: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "silu_mul",
        &Params {
            inter: inter as u32,
            pad: [0; 3],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("silu_mul"),
        &[step, &p, gu, out],
        Grid::Elements {
            width: inter as u32,
            per: 256,
        },
    )
}
