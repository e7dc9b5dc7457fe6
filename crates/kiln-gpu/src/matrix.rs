//! Weight matrices on the GPU: row-major `(rows, cols)`, split by rows into chunks that each
//! fit one storage binding and each have a [`WeightFormat`] (f16 two per u32, or GGUF blocks
//! kept quantized). A matrix stacked from several tensors (Q, K and V) keeps each tensor's
//! format, so a Q4_K_M file's Q4_K and Q6_K projections stay as they are. Chunks end on row
//! boundaries, and rows are whole blocks, so no block is ever split.

use crate::{GpuContext, GpuError, HostMatrix, WeightFormat};

pub struct MatrixChunk {
    pub buffer: wgpu::Buffer,
    pub format: WeightFormat,
    pub row_offset: u32,
    pub rows: u32,
    /// Where the block scales start in `buffer`, in u32 words (0 for f16).
    pub scale_offset: u32,
}

pub struct GpuMatrix {
    pub rows: usize,
    pub cols: usize,
    pub chunks: Vec<MatrixChunk>,
    /// Rows interleaved from two halves (gate and up: [`HostMatrix::paired`]).
    pub paired: bool,
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
        if data.len() != rows * cols {
            return Err(GpuError::Shape {
                op: "upload",
                detail: format!("{label}: {} values for ({rows}, {cols})", data.len()),
            });
        }
        Self::upload_host(ctx, label, &HostMatrix::from_f32(data, rows, cols))
    }

    /// Uploads `m` in its format, in as few chunks as the binding size allows.
    pub fn upload_host(ctx: &GpuContext, label: &str, m: &HostMatrix) -> Result<Self, GpuError> {
        Self::upload_stacked(ctx, label, std::slice::from_ref(m))
    }

    /// Uploads `parts` (same columns) stacked by rows, each run of parts of one format in its
    /// own chunks.
    pub fn upload_stacked(
        ctx: &GpuContext,
        label: &str,
        parts: &[HostMatrix],
    ) -> Result<Self, GpuError> {
        let cols = parts.first().map_or(0, |p| p.cols);
        if parts.iter().any(|p| p.cols != cols) {
            return Err(GpuError::Shape {
                op: "upload",
                detail: format!("{label}: stacked matrices differ in width"),
            });
        }
        let mut out = Self {
            rows: 0,
            cols,
            chunks: Vec::new(),
            paired: false,
        };
        // Consecutive parts of one format become one matrix (fewer chunks, fewer dispatches).
        let mut groups: Vec<HostMatrix> = Vec::new();
        for m in parts {
            match groups.last_mut() {
                Some(g) if g.format == m.format => {
                    g.bytes.extend_from_slice(&m.bytes);
                    g.rows += m.rows;
                }
                _ => groups.push(m.clone()),
            }
        }
        for m in &groups {
            let row_bytes = m.format.gpu_row_bytes(m.cols) as u64;
            let rows_per_chunk = ((ctx.max_binding() / row_bytes.max(1)) as usize / 64 * 64).max(1);
            let part = Self::upload_chunked(ctx, label, m, rows_per_chunk)?;
            for mut c in part.chunks {
                c.row_offset += out.rows as u32;
                out.chunks.push(c);
            }
            out.rows += m.rows;
        }
        Ok(out)
    }

    /// As [`Self::upload_host`], with at most `rows_per_chunk` rows per buffer.
    pub fn upload_chunked(
        ctx: &GpuContext,
        label: &str,
        m: &HostMatrix,
        rows_per_chunk: usize,
    ) -> Result<Self, GpuError> {
        if !m.cols.is_multiple_of(m.format.cols_multiple())
            || m.bytes.len() != m.rows * m.format.row_bytes(m.cols)
        {
            return Err(GpuError::Shape {
                op: "upload",
                detail: format!(
                    "{label}: {} bytes of {:?} for ({}, {}); columns must be a multiple of {}",
                    m.bytes.len(),
                    m.format,
                    m.rows,
                    m.cols,
                    m.format.cols_multiple()
                ),
            });
        }
        let mut chunks = Vec::new();
        for start in (0..m.rows).step_by(rows_per_chunk.max(1)) {
            let n = rows_per_chunk.min(m.rows - start);
            let (bytes, scale_offset) = m.gpu_chunk(start, n);
            let buffer = ctx.storage_init(label, &bytes);
            chunks.push(MatrixChunk {
                buffer,
                format: m.format,
                row_offset: start as u32,
                rows: n as u32,
                scale_offset,
            });
        }
        Ok(Self {
            rows: m.rows,
            cols: m.cols,
            chunks,
            paired: false,
        })
    }

    /// Uploads `parts` (gate rows, then up rows) with the halves' rows interleaved
    /// ([`HostMatrix::paired`]), or `None` when the parts differ in format or width.
    pub fn upload_paired(
        ctx: &GpuContext,
        label: &str,
        parts: &[HostMatrix],
    ) -> Result<Option<Self>, GpuError> {
        let Some(m) = HostMatrix::paired(parts) else {
            return Ok(None);
        };
        let mut out = Self::upload_host(ctx, label, &m)?;
        out.paired = true;
        Ok(Some(out))
    }

    /// Bytes held on the GPU.
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.buffer.size()).sum()
    }
}
