//! A layer's weights on the GPU as its launches read them: norm gains and vectors (biases,
//! sinks) as f32, each checked against the shape its operation names, and stacks of matrices
//! uploaded as one in the row order their product needs, counting the bytes they take.

use kiln_model::{ModelConfig, Tensor, Weights};

use super::{LayerContext, RowOrder};
use crate::{GpuError, GpuMatrix};

pub(super) struct Upload<'a> {
    l: &'a LayerContext<'a>,
    /// The bytes of the matrices uploaded so far.
    pub matrix_bytes: u64,
}

impl<'a> Upload<'a> {
    pub fn new(l: &'a LayerContext<'a>) -> Self {
        Upload { l, matrix_bytes: 0 }
    }

    /// Norm gains, each of `ts` with its rows reordered as `order` says (q/k norm gains), in
    /// one buffer.
    pub fn gains(&self, ts: &[&Tensor], order: RowOrder) -> Result<wgpu::Buffer, GpuError> {
        let mut g = Vec::new();
        for t in ts {
            let v = gain(self.l.weights, self.l.config, t)?;
            g.extend((0..v.len()).map(|r| v[order.source(r)]));
        }
        Ok(self
            .l
            .ctx
            .storage_init(&ts[0].name, bytemuck::cast_slice(&g)))
    }

    /// A vector (a bias, sinks) as f32, its size checked.
    pub fn vector(&self, t: &Tensor) -> Result<Vec<f32>, GpuError> {
        let got = self.l.weights.shape(&t.name)?;
        if got.iter().product::<usize>() != t.len() {
            return Err(GpuError::Shape {
                op: "load",
                detail: format!("{}: expected {:?}, file has {got:?}", t.name, t.shape),
            });
        }
        Ok(self.l.weights.read_f32(&t.name)?)
    }

    /// [`Upload::vector`] in a buffer.
    pub fn vector_buffer(&self, t: &Tensor) -> Result<wgpu::Buffer, GpuError> {
        let v = self.vector(t)?;
        Ok(self.l.ctx.storage_init(&t.name, bytemuck::cast_slice(&v)))
    }

    /// Vectors stored one a part (an expert's biases), as one buffer; `paired`: two halves,
    /// gate and up, interleaved as a paired matrix's rows are (gate j, up j).
    pub fn vectors(&self, ts: &[Tensor], paired: bool) -> Result<wgpu::Buffer, GpuError> {
        let mut v = Vec::new();
        for t in ts {
            v.extend(self.vector(t)?);
        }
        if paired {
            let (g, u) = v.split_at(v.len() / 2);
            v = g.iter().zip(u).flat_map(|(&g, &u)| [g, u]).collect();
        }
        Ok(self
            .l
            .ctx
            .storage_init(&ts[0].name, bytemuck::cast_slice(&v)))
    }

    /// A stack of matrices (stored separately or fused) uploaded as one, its rows in
    /// `order`; with its row count.
    pub fn stack(&mut self, ts: &[&Tensor], order: RowOrder) -> Result<(GpuMatrix, u32), GpuError> {
        let parts: Vec<(&str, usize)> = ts.iter().map(|t| (t.name.as_str(), t.shape[0])).collect();
        let rows: usize = parts.iter().map(|p| p.1).sum();
        let m = (self.l.matrix)(&ts[0].name, &parts, ts[0].shape[1], order)?;
        self.matrix_bytes += m.bytes();
        Ok((m, rows as u32))
    }
}

/// Reads a norm gain (with the config's offset) and checks its shape.
pub(crate) fn gain(w: &Weights, c: &ModelConfig, t: &Tensor) -> Result<Vec<f32>, GpuError> {
    let got = w.shape(&t.name)?;
    if got != t.shape {
        return Err(GpuError::Shape {
            op: "load",
            detail: format!("{}: expected {:?}, file has {got:?}", t.name, t.shape),
        });
    }
    Ok(c.read_gain(w, &t.name)?)
}
