//! Weight matrices on the GPU: f16, two per u32 (so the kernels run without shader-f16),
//! row-major `(rows, cols)`, split by rows into chunks that each fit one storage binding.

use half::f16;

use crate::{GpuContext, GpuError};

pub struct MatrixChunk {
    pub buffer: wgpu::Buffer,
    pub row_offset: u32,
    pub rows: u32,
}

pub struct GpuMatrix {
    pub rows: usize,
    pub cols: usize,
    pub chunks: Vec<MatrixChunk>,
}

impl GpuMatrix {
    /// Uploads `data` (`rows * cols` values, row-major) as f16. `cols` must be even.
    pub fn upload(
        ctx: &GpuContext,
        label: &str,
        data: &[f32],
        rows: usize,
        cols: usize,
    ) -> Result<Self, GpuError> {
        if data.len() != rows * cols || !cols.is_multiple_of(2) {
            return Err(GpuError::Shape {
                op: "upload",
                detail: format!(
                    "{label}: {} values for ({rows}, {cols}); cols must be even",
                    data.len()
                ),
            });
        }
        let row_bytes = cols as u64 * 2;
        let rows_per_chunk = ((ctx.max_binding() / row_bytes) as usize / 64 * 64).max(1);
        Self::upload_chunked(ctx, label, data, rows, cols, rows_per_chunk)
    }

    /// As [`Self::upload`], with at most `rows_per_chunk` rows per buffer.
    pub fn upload_chunked(
        ctx: &GpuContext,
        label: &str,
        data: &[f32],
        rows: usize,
        cols: usize,
        rows_per_chunk: usize,
    ) -> Result<Self, GpuError> {
        let mut chunks = Vec::new();
        let mut packed: Vec<u16> = Vec::new();
        for start in (0..rows).step_by(rows_per_chunk) {
            let n = rows_per_chunk.min(rows - start);
            packed.clear();
            packed.extend(
                data[start * cols..(start + n) * cols]
                    .iter()
                    .map(|&v| f16::from_f32(v).to_bits()),
            );
            let buffer = ctx.storage_init(label, bytemuck::cast_slice(&packed));
            chunks.push(MatrixChunk {
                buffer,
                row_offset: start as u32,
                rows: n as u32,
            });
        }
        Ok(Self { rows, cols, chunks })
    }

    /// Bytes held on the GPU.
    pub fn bytes(&self) -> u64 {
        (self.rows * self.cols * 2) as u64
    }
}
