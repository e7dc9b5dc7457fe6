//! `y (+)= s * x (g W)^T + b`: the tiled kernel for many rows, the matrix-vector kernel for few,
//! each compiled for the weight matrix's format, with the epilogue all share
//! (`shaders/matmul_epilogue.wgsl`: bias, residual, or a gated activation of output pairs).

use bytemuck::{Pod, Zeroable};

use kiln_model::Activation;

use crate::{GpuContext, GpuError, GpuMatrix, Grid, Kernels, Launch};

/// Rows up to which `matvec.wgsl` is used (the subgroup kernel's bound is
/// [`Kernels::matvec_rows`]).
pub const MATVEC_MAX_ROWS: u32 = 8;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    k: u32,
    n: u32,
    out_offset: u32,
    ldy: u32,
    flags: u32,
    eps: f32,
    /// Where the weight chunk's block scales start, in u32s.
    so: u32,
    pad: u32,
}

const NORM: u32 = 1;
const BIAS: u32 = 2;
const ACCUMULATE: u32 = 4;
const SAMPLE_ROWS: u32 = 8;
const GLU: u32 = 16;
const GELU: u32 = 32;

pub struct MatmulArgs<'a> {
    /// Input, `(rows, w.cols)`.
    pub x: &'a wgpu::Buffer,
    pub w: &'a GpuMatrix,
    /// Bias of `w.rows` values.
    pub bias: Option<&'a wgpu::Buffer>,
    /// Output, `(rows, ldy)`; this product fills columns `out_offset..out_offset + w.rows`.
    pub y: &'a wgpu::Buffer,
    pub ldy: u32,
    pub out_offset: u32,
    /// RMSNorm of each row first: its gain (`w.cols` values) and epsilon. The kernels scale the
    /// product by 1 / rms(row) and multiply the weights by the gain as they load them.
    pub norm: Option<(&'a wgpu::Buffer, f32)>,
    /// Add into `y` instead of overwriting it (residual connection).
    pub accumulate: bool,
    /// The rows are the step's sampled rows rather than its tokens.
    pub sample_rows: bool,
    /// A gated activation of output pairs: `w`'s rows interleave gate and up rows
    /// ([`GpuMatrix::paired`]) and `y` (`ldy` = half of `w.rows`) gets `act(gate) * up` from
    /// column `out_offset`.
    pub glu: Option<Activation>,
}

pub struct Matmul {
    small: Vec<Launch>,
    large: Vec<Launch>,
    /// Most rows the `small` launches take.
    small_max_rows: u32,
    sample_rows: bool,
}

impl Matmul {
    /// The product's launches. A gated activation needs a paired matrix with no bias and no
    /// residual.
    pub fn new(
        ctx: &GpuContext,
        kernels: &Kernels,
        step: &wgpu::Buffer,
        a: MatmulArgs<'_>,
    ) -> Result<Self, GpuError> {
        if a.glu.is_some() && (!a.w.paired || a.bias.is_some() || a.accumulate) {
            return Err(GpuError::Shape {
                op: "matmul",
                detail: "a gated activation needs interleaved gate/up rows, no bias, no residual"
                    .into(),
            });
        }
        let flags = a.norm.map_or(0, |_| NORM)
            | a.bias.map_or(0, |_| BIAS)
            | if a.accumulate { ACCUMULATE } else { 0 }
            | if a.sample_rows { SAMPLE_ROWS } else { 0 }
            | match a.glu {
                Some(Activation::GeluTanh) => GLU | GELU,
                Some(_) => GLU,
                None => 0,
            };
        // With a gated activation the outputs (and the columns written) are pairs.
        let per_output = if a.glu.is_some() { 2 } else { 1 };
        let rowwise = kernels.rowwise && a.w.cols.is_multiple_of(8);
        // The subgroup kernel reads octets, so K must be a multiple of 8.
        let subgroup_rows = kernels.matvec_rows.filter(|_| a.w.cols.is_multiple_of(8));
        // The (few rows, many rows) kernels for a chunk's format: the chunks of a stacked
        // matrix may differ.
        let pick = |f| {
            if rowwise {
                (
                    kernels.get_for("matvec_rowwise", f),
                    kernels.get_for("matmul_rowwise", f),
                )
            } else if let Some(rows) = subgroup_rows {
                (
                    kernels.get_for_with("matvec_subgroup", f, &[("MAX_ROWS", rows as f64)]),
                    kernels.get_for("matmul", f),
                )
            } else {
                (kernels.get_for("matvec", f), kernels.get_for("matmul", f))
            }
        };
        let mut small = Vec::new();
        let mut large = Vec::new();
        let no_gain = ctx.storage("no gain", 16);
        for c in &a.w.chunks {
            let (matvec, matmul) = pick(c.format);
            let bias = match a.bias {
                Some(b) => {
                    // Each chunk reads its own slice of the bias.
                    let bytes = c.rows as u64 * 4;
                    let slice = ctx.storage("bias chunk", bytes);
                    let mut enc = ctx.device.create_command_encoder(&Default::default());
                    enc.copy_buffer_to_buffer(
                        b,
                        c.row_offset as u64 * 4,
                        &slice,
                        0,
                        bytes.next_multiple_of(4),
                    );
                    ctx.queue.submit([enc.finish()]);
                    slice
                }
                None => ctx.storage("no bias", 16),
            };
            let p = super::params(
                ctx,
                "matmul",
                &Params {
                    k: a.w.cols as u32,
                    n: c.rows,
                    out_offset: a.out_offset + c.row_offset / per_output,
                    ldy: a.ldy,
                    flags,
                    eps: a.norm.map_or(0.0, |n| n.1),
                    so: c.scale_offset,
                    pad: 0,
                },
            );
            let buffers = [
                step,
                &p,
                a.x,
                &c.buffer,
                &bias,
                a.y,
                a.norm.map_or(&no_gain, |n| n.0),
            ];
            let (small_grid, large_grid) = if rowwise {
                (
                    Grid::Tiles {
                        x: c.rows.div_ceil(64 * per_output),
                        per: 8,
                        samples: a.sample_rows,
                    },
                    Grid::Tiles {
                        x: c.rows.div_ceil(256),
                        per: 8,
                        samples: a.sample_rows,
                    },
                )
            } else {
                (
                    Grid::Fixed([c.rows.div_ceil(4), 1, 1]),
                    Grid::Tiles {
                        x: c.rows.div_ceil(64),
                        per: 32,
                        samples: a.sample_rows,
                    },
                )
            };
            small.push(Launch::new(&ctx.device, matvec, &buffers, small_grid));
            large.push(Launch::new(&ctx.device, matmul, &buffers, large_grid));
        }
        // The row-wise kernels: one output per invocation pays off only for a single row; from
        // two rows on, the 4-output tiles reuse each load of x.
        let small_max_rows = match (rowwise, subgroup_rows) {
            (true, _) => 1,
            (false, Some(rows)) => rows,
            (false, None) => MATVEC_MAX_ROWS,
        };
        Ok(Self {
            small,
            large,
            small_max_rows,
            sample_rows: a.sample_rows,
        })
    }

    /// Records the product's dispatches (one per chunk); returns how many.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) -> u32 {
        let rows = if self.sample_rows { samples } else { tokens };
        if rows == 0 {
            return 0;
        }
        let launches = if rows <= self.small_max_rows {
            &self.small
        } else {
            &self.large
        };
        launches
            .iter()
            .map(|l| l.record(pass, tokens, samples))
            .sum()
    }
}
