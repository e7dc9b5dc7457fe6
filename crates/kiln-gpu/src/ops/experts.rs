//! A mixture of experts' launches: the router's choice of experts for each token
//! (`shaders/moe_route.wgsl`), the products with the chosen experts' stacked matrices
//! (`shaders/moe_matvec.wgsl`, compiled for the matrix's format with the shared epilogue):
//! gate and up into each token's chosen experts' activations, then down, weighted and summed
//! into the residual stream; and a gated shared expert's gate (`shaders/moe_shared_gate.wgsl`).

use bytemuck::{Pod, Zeroable};

use kiln_model::{Activation, Moe, Scoring};

use super::matmul::{ACCUMULATE, EXPERT_BIAS, NORM, Params, SCALE, glu_flags};
use crate::kernels::PairEpilogue;
use crate::{GpuContext, GpuError, GpuMatrix, Grid, Kernels, Launch};

/// Outputs per workgroup of `moe_matvec.wgsl` (16 invocations of 4).
const OUTPUTS: u32 = 64;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RouteParams {
    experts: u32,
    slots: u32,
    normalize: u32,
    stride: u32,
    sigmoid: u32,
    scale: f32,
    biased: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GateParams {
    width: u32,
    stride: u32,
    column: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Route {
    slots: u32,
    summed: u32,
    /// The chunk's rows of the stack.
    row0: u32,
    rows: u32,
}

/// The step's routing: each token's chosen experts and their weights.
pub struct Routing<'a> {
    pub ids: &'a wgpu::Buffer,
    pub weights: &'a wgpu::Buffer,
}

/// The router's logits: each token's row of `stride`, the experts' first (a gated shared
/// expert's gate after them).
pub struct RouterLogits<'a> {
    pub logits: &'a wgpu::Buffer,
    pub stride: usize,
}

/// Each token's experts and weights from its router logits; `choice_bias` (each expert's,
/// where `moe.choice_bias`) on the choice.
pub fn moe_route(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    moe: &Moe,
    router: RouterLogits,
    choice_bias: Option<&wgpu::Buffer>,
    r: &Routing,
) -> Result<Launch, GpuError> {
    if moe.choice_bias != choice_bias.is_some() || router.stride < moe.experts {
        return Err(GpuError::Shape {
            op: "moe_route",
            detail: format!(
                "choice biases {} given {}, {} experts in rows of {} logits",
                moe.choice_bias,
                choice_bias.is_some(),
                moe.experts,
                router.stride
            ),
        });
    }
    let p = super::params(
        ctx,
        "moe_route",
        &RouteParams {
            experts: moe.experts as u32,
            slots: moe.experts_per_token as u32,
            normalize: moe.normalize as u32,
            stride: router.stride as u32,
            sigmoid: (moe.scoring == Scoring::Sigmoid) as u32,
            scale: moe.scale,
            biased: moe.choice_bias as u32,
            pad: 0,
        },
    );
    let no_bias = ctx.placeholder(16);
    let bias = choice_bias.unwrap_or(&no_bias);
    Ok(Launch::new(
        &ctx.device,
        kernels.get("moe_route"),
        &[step, &p, router.logits, r.ids, r.weights, bias],
        Grid::Tokens { per: 64, y: 1 },
    ))
}

/// A gated shared expert's activations (rows of `width`) times the sigmoid of each token's
/// gate logit, column `column` of the router's logits.
pub fn moe_shared_gate(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    router: RouterLogits,
    column: usize,
    (act, width): (&wgpu::Buffer, usize),
) -> Launch {
    let p = super::params(
        ctx,
        "moe_shared_gate",
        &GateParams {
            width: width as u32,
            stride: router.stride as u32,
            column: column as u32,
            pad: 0,
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("moe_shared_gate"),
        &[step, &p, router.logits, act],
        Grid::Elements {
            width: width as u32,
            per: 256,
        },
    )
}

/// What one product with the experts' matrices reads and writes.
#[derive(Clone)]
pub struct ExpertProduct<'a> {
    /// Gate and up: the residual stream, normalized with this gain. Down: the activations.
    pub x: &'a wgpu::Buffer,
    pub norm: Option<(&'a wgpu::Buffer, f32)>,
    /// Every expert's matrix, `rows_per_expert` rows each, in chunks of whole groups of 4 rows
    /// (an upload cuts a matrix at multiples of 64).
    pub w: &'a GpuMatrix,
    pub rows_per_expert: usize,
    pub y: &'a wgpu::Buffer,
    /// Gate and up (interleaved pairs, [`GpuMatrix::paired`]) made the gated activation, a
    /// row of `y` for each token's expert; else (down) the weighted sum added into each
    /// token's row.
    pub glu: Option<Activation>,
    /// Each output is multiplied by this (down: Granite's residual multiplier).
    pub scale: f32,
    /// Each expert's bias on its outputs (experts x `rows_per_expert`, in the rows' order),
    /// added before the router's weight (gpt-oss's).
    pub bias: Option<&'a wgpu::Buffer>,
}

/// Checks a product's shapes and writes each chunk's parameters for the kernel `op`; returns
/// the rows an expert and the parameters, a buffer per chunk.
pub(super) fn product_params(
    ctx: &GpuContext,
    op: &'static str,
    a: &ExpertProduct,
) -> Result<(u32, Vec<wgpu::Buffer>), GpuError> {
    let refuse = |detail: String| Err(GpuError::Shape { op, detail });
    let cols_ok = a.w.cols.is_multiple_of(8) && a.rows_per_expert.is_multiple_of(4);
    if !cols_ok || !a.w.rows.is_multiple_of(a.rows_per_expert) {
        return refuse(format!(
            "{} x {} is not experts of {} rows (a multiple of 4) of a multiple of 8 columns",
            a.w.rows, a.w.cols, a.rows_per_expert
        ));
    }
    let whole_groups =
        |c: &crate::matrix::MatrixChunk| c.row_offset.is_multiple_of(4) && c.rows.is_multiple_of(4);
    if a.w.chunks.iter().any(|c| !whole_groups(c)) {
        return refuse("the experts' matrix is split within a group of 4 rows".into());
    }
    if a.glu.is_some() && !a.w.paired {
        return refuse("gate and up stored in different formats".into());
    }
    let n = a.rows_per_expert as u32;
    let flags = a.norm.map_or(0, |_| NORM)
        | match a.glu {
            Some(act) => glu_flags(act),
            None => ACCUMULATE,
        }
        | a.bias.map_or(0, |_| EXPERT_BIAS)
        | if a.scale != 1.0 { SCALE } else { 0 };
    let params = (a.w.chunks.iter())
        .map(|chunk| {
            super::params(
                ctx,
                op,
                &Params {
                    k: a.w.cols as u32,
                    n,
                    out_offset: 0,
                    ldy: if a.glu.is_some() { n / 2 } else { n },
                    flags,
                    eps: a.norm.map_or(0.0, |n| n.1),
                    so: chunk.scale_offset,
                    factor: a.scale,
                },
            )
        })
        .collect();
    Ok((n, params))
}

/// The product's launches (one per chunk of the stack) for the tokens' `slots` experts each,
/// on steps of fewer than `until` tokens (larger ones run the grouped product).
pub fn expert_matvec(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (slots, until): (usize, u32),
    r: &Routing,
    a: ExpertProduct,
) -> Result<Vec<Launch>, GpuError> {
    let (n, params) = product_params(ctx, "moe_matvec", &a)?;
    let no_bias = ctx.placeholder(16);
    let gain = a.norm.map_or(&no_bias, |n| n.0);
    let mut launches = Vec::new();
    for (chunk, p) in a.w.chunks.iter().zip(&params) {
        let route = ctx.uniform_init(
            "moe route",
            bytemuck::bytes_of(&Route {
                slots: slots as u32,
                summed: a.glu.is_none() as u32,
                row0: chunk.row_offset,
                rows: chunk.rows,
            }),
        );
        let kernel = kernels.get_matrix("moe_matvec", chunk.format, PairEpilogue::Glu, &[]);
        let buffers = [
            step,
            p,
            a.x,
            &chunk.buffer,
            a.bias.unwrap_or(&no_bias),
            a.y,
            gain,
            &route,
            r.ids,
            r.weights,
        ];
        let z = if a.glu.is_some() { slots as u32 } else { 1 };
        let grid = Grid::TokensZ {
            y: n.div_ceil(OUTPUTS),
            z,
        };
        let grid = Grid::Within {
            tokens: 0..until,
            grid: Box::new(grid),
        };
        launches.push(Launch::new(&ctx.device, kernel, &buffers, grid));
    }
    Ok(launches)
}
