use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    width: u32,
    pad: [u32; 3],
}

/// `y[t, i] = relu(y[t, i])^2` in place, over the step's tokens' rows of `width`.
pub fn relu_squared(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    width: usize,
    y: &wgpu::Buffer,
) -> Launch {
    let p = super::params(
        ctx,
        "relu_squared",
        &Params {
            width: width as u32,
            pad: [0; 3],
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("relu_squared"),
        &[step, &p, y],
        Grid::Elements {
            width: width as u32,
            per: 256,
        },
    )
}
