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
    pad: [u32; 3],
}

/// `x[t, :] = table[token_ids[t], :] * scale`, one launch per chunk of the table.
pub fn embedding(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    token_ids: &wgpu::Buffer,
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
                    pad: [0; 3],
                },
            );
            Launch::new(
                &ctx.device,
                kernel,
                &[step, &p, token_ids, &c.buffer, x],
                Grid::Tokens { per: 1, y: 1 },
            )
        })
        .collect()
}
