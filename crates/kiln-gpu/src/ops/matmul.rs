//! `y (+)= s * x W^T + b`: the tiled kernel for many rows, the matrix-vector kernel for few.

use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, GpuMatrix, Grid, Kernels, Launch};

/// Rows up to which the matrix-vector kernel is used.
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
    pad: [u32; 2],
}

const NORM: u32 = 1;
const BIAS: u32 = 2;
const ACCUMULATE: u32 = 4;
const SAMPLE_ROWS: u32 = 8;

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
    /// Scale each row by 1 / rms(row) (RMSNorm whose gain is folded into `w`).
    pub norm_eps: Option<f32>,
    /// Add into `y` instead of overwriting it (residual connection).
    pub accumulate: bool,
    /// The rows are the step's sampled rows rather than its tokens.
    pub sample_rows: bool,
}

pub struct Matmul {
    small: Vec<Launch>,
    large: Vec<Launch>,
    /// Most rows the `small` launches take.
    small_max_rows: u32,
    sample_rows: bool,
}

impl Matmul {
    pub fn new(
        ctx: &GpuContext,
        kernels: &Kernels,
        step: &wgpu::Buffer,
        a: MatmulArgs<'_>,
    ) -> Self {
        let flags = a.norm_eps.map_or(0, |_| NORM)
            | a.bias.map_or(0, |_| BIAS)
            | if a.accumulate { ACCUMULATE } else { 0 }
            | if a.sample_rows { SAMPLE_ROWS } else { 0 };
        let rowwise = kernels.rowwise && a.w.cols.is_multiple_of(8);
        let (matvec, matmul) = if rowwise {
            (kernels.get("matvec_rowwise"), kernels.get("matmul_rowwise"))
        } else {
            (kernels.get("matvec"), kernels.get("matmul"))
        };
        let mut small = Vec::new();
        let mut large = Vec::new();
        for c in &a.w.chunks {
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
                    out_offset: a.out_offset + c.row_offset,
                    ldy: a.ldy,
                    flags,
                    eps: a.norm_eps.unwrap_or(0.0),
                    pad: [0; 2],
                },
            );
            let buffers = [step, &p, a.x, &c.buffer, &bias, a.y];
            let (small_grid, large_grid) = if rowwise {
                (
                    Grid::Tiles {
                        x: c.rows.div_ceil(64),
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
            small.push(Launch::new(
                &ctx.device,
                matvec.clone(),
                &buffers,
                small_grid,
            ));
            large.push(Launch::new(
                &ctx.device,
                matmul.clone(),
                &buffers,
                large_grid,
            ));
        }
        // The row-wise kernels: one output per invocation pays off only for a single row; from
        // two rows on, the 4-output tiles reuse each load of x.
        let small_max_rows = if rowwise { 1 } else { MATVEC_MAX_ROWS };
        Self {
            small,
            large,
            small_max_rows,
            sample_rows: a.sample_rows,
        }
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) {
        let rows = if self.sample_rows { samples } else { tokens };
        if rows == 0 {
            return;
        }
        let launches = if rows <= self.small_max_rows {
            &self.small
        } else {
            &self.large
        };
        for l in launches {
            l.record(pass, tokens, samples);
        }
    }
}
