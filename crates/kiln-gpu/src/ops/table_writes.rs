//! The launch that applies a step's block-table writes to the rows the runner keeps
//! (`shaders/table_writes.wgsl`; [`kiln_core::SeqInBatch::table_row`]).

use crate::{GpuContext, Grid, Kernels, Launch};

/// Workgroups of the launch (`WORKGROUPS` in the shader).
const WORKGROUPS: u32 = 16;

/// Copies each run of `writes` into `block_tables`: a count of runs, then per run (first
/// entry, length, offset of its blocks in `writes`), then the blocks.
pub fn table_writes(
    ctx: &GpuContext,
    kernels: &Kernels,
    writes: &wgpu::Buffer,
    block_tables: &wgpu::Buffer,
) -> Launch {
    Launch::new(
        &ctx.device,
        kernels.get("table_writes"),
        &[writes, block_tables],
        Grid::Fixed([WORKGROUPS, 1, 1]),
    )
}
