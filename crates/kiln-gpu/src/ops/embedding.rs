use bytemuck::{Pod, Zeroable};

use crate::{GpuContext, GpuMatrix, Grid, Kernels, Launch};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    hidden: u32,
    row_offset: u32,
    rows: u32,
    /// Where the chunk's block scales start, in u32s.
    so: u32,
    /// Every value is multiplied by this (Gemma: sqrt of the hidden size).
    scale: f32,
    /// 1: the row is added to `x` (learned position embeddings), 0: it replaces it.
    add: u32,
    pad: [u32; 2],
}

/// `x[t, :] = table[ids[t], :] * scale` (token ids), or with `add`, `x[t, :] +=` the row
/// (positions, into a learned position embedding); one launch per chunk of the table.
pub fn embedding(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    (ids, add): (&wgpu::Buffer, bool),
    (table, scale): (&GpuMatrix, f32),
    x: &wgpu::Buffer,
) -> Vec<Launch> {
    table
        .chunks
        .iter()
        .map(|c| {
            let kernel = kernels.get_for("embedding", c.format);
            let p = super::params(
                ctx,
                "embedding",
                &Params {
                    hidden: table.cols as u32,
                    row_offset: c.row_offset,
                    rows: c.rows,
                    so: c.scale_offset,
                    scale,
                    add: add.into(),
                    pad: [0; 2],
                },
            );
            Launch::new(
                &ctx.device,
                kernel,
                &[step, &p, ids, &c.buffer, x],
                Grid::Tokens { per: 1, y: 1 },
            )
        })
        .collect()
}
