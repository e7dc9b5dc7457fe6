use bytemuck::{Pod, Zeroable};
use kiln_model::Activation;

use crate::{GpuContext, GpuError, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    width: u32,
    kind: u32,
    pad: [u32; 2],
}

/// `y[t, i] = act(y[t, i])` in place, over the step's tokens' rows of `width`: the activation
/// of a MLP without a gate, relu(x)^2 or GELU (the tanh approximation or exact).
pub fn ungated(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (width, act): (usize, Activation),
    y: &wgpu::Buffer,
) -> Result<Launch, GpuError> {
    let kind = match act {
        Activation::Relu2 => 0,
        Activation::GeluTanh => 1,
        Activation::Gelu => 3,
        other => {
            return Err(GpuError::Shape {
                op: "ungated",
                detail: format!("a MLP without a gate activated by {other:?}"),
            });
        }
    };
    let p = super::params(
        ctx,
        "ungated",
        &Params {
            width: width as u32,
            kind,
            pad: [0; 2],
        },
    );
    Ok(Launch::new(
        &ctx.device,
        kernels.get("ungated"),
        &[step, &p, y],
        Grid::Elements {
            width: width as u32,
            per: 256,
        },
    ))
}
