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
}

/// `x[t, :] = table[token_ids[t], :]`, one launch per chunk of the table.
pub fn embedding(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    token_ids: &wgpu::Buffer,
    table: &GpuMatrix,
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
