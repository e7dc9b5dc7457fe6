//! How a weight matrix is stored on the GPU, and the host-side matrix that is uploaded.
//!
//! Quantized matrices keep GGUF's blocks (32 weights, or 256 for the K-quants), repacked
//! without growing (Q6_K: by 2 bytes in 210): each chunk buffer holds the quants of its rows
//! first (row-major, the block's quant bytes in file order, so every block starts on a word)
//! and then each block's scale bytes in the same order (`d`; `d` and `m` for Q4_1 and Q5_1;
//! MXFP4's exponent byte; IQ4_XS's `d` and 6-bit scales; Q2_K's 16 sub-block scale bytes (its `d` and `dmin` stay with the
//! quants); Q3_K's 12 bytes of scales and `d`; Q6_K's 16 scales and `d`; none for Q4_K and Q5_K, whose 144- and 176-byte blocks stay
//! whole). The matrix kernels dequantize in registers through the format's WGSL snippet
//! (`shaders/weights_*.wgsl`), which the kernel loader appends to the kernel's source. Every
//! quantized type kiln reads has one; F32, BF16 and F16 matrices are stored as f16.

use half::f16;
use kiln_model::gguf::dequant;
use kiln_model::{DType, Weights};

use crate::GpuError;

/// Whether matrices of a type with a kept-quantized format stay quantized on the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WeightStorage {
    /// Every quantized type stays in its blocks (about the file's size on the GPU), with both
    /// kernel families (on lavapipe the row-wise family decodes these no slower than f16:
    /// BENCHMARKS.md).
    #[default]
    Quantized,
    /// Every matrix widened to f16.
    F16,
}

impl WeightStorage {
    /// Whether quantized matrices are kept.
    pub fn keeps_quantized(self) -> bool {
        self == WeightStorage::Quantized
    }
}

impl std::fmt::Display for WeightStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightStorage::Quantized => "quantized",
            WeightStorage::F16 => "f16",
        })
    }
}

impl std::str::FromStr for WeightStorage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "quantized" => Ok(WeightStorage::Quantized),
            "f16" => Ok(WeightStorage::F16),
            _ => Err(format!(
                "unknown weight storage `{s}`: expected quantized or f16"
            )),
        }
    }
}

/// A weight matrix's element format on the GPU.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// f16, two per u32: float matrices, and quantized ones when widened.
    F16,
    /// f32, for matrices with values beyond f16's range (which would become infinities).
    F32,
    /// Blocks of 32 signed bytes with an f16 scale `d`: w = d * q.
    Q8_0,
    /// Blocks of 32 nibbles with an f16 scale `d`: w = d * (q - 8).
    Q4_0,
    /// Blocks of 32 nibbles with f16 `d` and `m`: w = d * q + m.
    Q4_1,
    /// Blocks of 32 five-bit values with an f16 scale `d`: w = d * (q - 16).
    Q5_0,
    /// Blocks of 32 five-bit values with f16 `d` and `m`: w = d * q + m.
    Q5_1,
    /// Super-blocks of 256 two-bit values in 16 sub-blocks with 4-bit scales and mins.
    Q2_K,
    /// Super-blocks of 256 three-bit values in 16 sub-blocks with 6-bit scales.
    Q3_K,
    /// Super-blocks of 256 nibbles in 8 sub-blocks with 6-bit scales and mins.
    Q4_K,
    /// The same with a fifth bit per weight.
    Q5_K,
    /// Super-blocks of 256 six-bit values in 16 sub-blocks with 8-bit scales.
    Q6_K,
    /// Blocks of 32 four-bit floats (E2M1) with a power-of-two scale, its exponent a byte.
    MXFP4,
    /// Blocks of 32 nibbles indexing 16 fixed levels, with an f16 scale `d`.
    IQ4_NL,
    /// Super-blocks of 256 of IQ4_NL's levels, a 6-bit scale per 32 under an f16 `d`.
    IQ4_XS,
}

impl WeightFormat {
    /// The format a tensor of `dtype` keeps on the GPU (F16 for every type it is widened from).
    pub fn for_dtype(dtype: DType) -> Self {
        match dtype {
            DType::Q8_0 => WeightFormat::Q8_0,
            DType::Q4_0 => WeightFormat::Q4_0,
            DType::Q4_1 => WeightFormat::Q4_1,
            DType::Q5_0 => WeightFormat::Q5_0,
            DType::Q5_1 => WeightFormat::Q5_1,
            DType::Q2_K => WeightFormat::Q2_K,
            DType::Q3_K => WeightFormat::Q3_K,
            DType::Q4_K => WeightFormat::Q4_K,
            DType::Q5_K => WeightFormat::Q5_K,
            DType::Q6_K => WeightFormat::Q6_K,
            DType::MXFP4 => WeightFormat::MXFP4,
            DType::IQ4_NL => WeightFormat::IQ4_NL,
            DType::IQ4_XS => WeightFormat::IQ4_XS,
            _ => WeightFormat::F16,
        }
    }

    /// The stored type with this layout in a GGUF file.
    pub fn dtype(self) -> DType {
        match self {
            WeightFormat::F16 => DType::F16,
            WeightFormat::F32 => DType::F32,
            WeightFormat::Q8_0 => DType::Q8_0,
            WeightFormat::Q4_0 => DType::Q4_0,
            WeightFormat::Q4_1 => DType::Q4_1,
            WeightFormat::Q5_0 => DType::Q5_0,
            WeightFormat::Q5_1 => DType::Q5_1,
            WeightFormat::Q2_K => DType::Q2_K,
            WeightFormat::Q3_K => DType::Q3_K,
            WeightFormat::Q4_K => DType::Q4_K,
            WeightFormat::Q5_K => DType::Q5_K,
            WeightFormat::Q6_K => DType::Q6_K,
            WeightFormat::MXFP4 => DType::MXFP4,
            WeightFormat::IQ4_NL => DType::IQ4_NL,
            WeightFormat::IQ4_XS => DType::IQ4_XS,
        }
    }

    /// The WGSL snippet (under `shaders/`) that reads this format.
    pub fn shader(self) -> &'static str {
        match self {
            WeightFormat::F16 => "weights_f16",
            WeightFormat::F32 => "weights_f32",
            WeightFormat::Q8_0 => "weights_q8_0",
            WeightFormat::Q4_0 => "weights_q4_0",
            WeightFormat::Q4_1 => "weights_q4_1",
            WeightFormat::Q5_0 => "weights_q5_0",
            WeightFormat::Q5_1 => "weights_q5_1",
            WeightFormat::Q2_K => "weights_q2_k",
            WeightFormat::Q3_K => "weights_q3_k",
            WeightFormat::Q4_K => "weights_q4_k",
            WeightFormat::Q5_K => "weights_q5_k",
            WeightFormat::Q6_K => "weights_q6_k",
            WeightFormat::MXFP4 => "weights_mxfp4",
            WeightFormat::IQ4_NL => "weights_iq4_nl",
            WeightFormat::IQ4_XS => "weights_iq4_xs",
        }
    }

    /// Columns must be a multiple of this.
    pub fn cols_multiple(self) -> usize {
        match self {
            WeightFormat::F16 | WeightFormat::F32 => 2,
            _ => self.dtype().block_size(),
        }
    }

    /// Which bytes of each file block are its scales, moved behind all the quants on the GPU
    /// (start, length), and the zero bytes added after each block's scales to keep them whole
    /// words.
    fn scales(self) -> (usize, usize, usize) {
        match self {
            WeightFormat::F16 | WeightFormat::F32 | WeightFormat::Q4_K | WeightFormat::Q5_K => {
                (0, 0, 0)
            }
            WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q5_0 | WeightFormat::IQ4_NL => {
                (0, 2, 0)
            }
            WeightFormat::IQ4_XS => (0, 8, 0),
            WeightFormat::Q4_1 | WeightFormat::Q5_1 => (0, 4, 0),
            WeightFormat::Q2_K => (0, 16, 0),
            WeightFormat::Q3_K => (96, 14, 0),
            WeightFormat::Q6_K => (192, 18, 2),
            WeightFormat::MXFP4 => (0, 1, 0),
        }
    }

    /// Bytes one row of `cols` takes in the file (and in a [`HostMatrix`]).
    pub fn row_bytes(self, cols: usize) -> usize {
        self.dtype().byte_len(cols)
    }

    /// Bytes one row of `cols` takes on the GPU: the file's, plus any padding of the scales.
    pub fn gpu_row_bytes(self, cols: usize) -> usize {
        let blocks = cols / self.dtype().block_size();
        self.row_bytes(cols) + blocks * self.scales().2
    }
}

/// Whether a finite value is beyond f16's range (65504), where f16 would make it an infinity.
fn beyond_f16(data: &[f32]) -> bool {
    data.iter()
        .any(|v| v.is_finite() && v.abs() > f16::MAX.to_f32())
}

/// A matrix in host memory in its GPU format, rows in file (GGUF block) layout.
#[derive(Clone, Debug)]
pub struct HostMatrix {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    pub bytes: Vec<u8>,
}

impl HostMatrix {
    /// f32 values (`rows * cols`, row-major) as an f16 matrix, or as f32 when a finite value is
    /// beyond f16's range (65504), where f16 would turn it into an infinity.
    pub fn from_f32(data: &[f32], rows: usize, cols: usize) -> Self {
        if beyond_f16(data) {
            return Self {
                format: WeightFormat::F32,
                rows,
                cols,
                bytes: bytemuck::cast_slice(data).to_vec(),
            };
        }
        let bytes = data
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect();
        Self {
            format: WeightFormat::F16,
            rows,
            cols,
            bytes,
        }
    }

    /// GGUF blocks of `dtype` (`rows` rows of `cols`) kept as they are when the type has a
    /// kept-quantized format, widened to f16 otherwise.
    pub fn from_stored(
        dtype: DType,
        bytes: Vec<u8>,
        rows: usize,
        cols: usize,
    ) -> Result<Self, GpuError> {
        let format = WeightFormat::for_dtype(dtype);
        if !cols.is_multiple_of(dtype.block_size()) || bytes.len() != dtype.byte_len(rows * cols) {
            return Err(GpuError::Shape {
                op: "upload",
                detail: format!(
                    "{} bytes of {} for ({rows}, {cols})",
                    bytes.len(),
                    dtype.name()
                ),
            });
        }
        if format.dtype() == dtype {
            return Ok(Self {
                format,
                rows,
                cols,
                bytes,
            });
        }
        Ok(Self::from_f32(&dequant::to_f32(dtype, &bytes), rows, cols))
    }

    /// The tensor `name` of `weights`, checked to have `shape` (rows, cols).
    pub fn load(weights: &Weights, name: &str, rows: usize, cols: usize) -> Result<Self, GpuError> {
        let got = weights.shape(name)?;
        if got != [rows, cols] {
            return Err(GpuError::Shape {
                op: "load",
                detail: format!("{name}: expected [{rows}, {cols}], file has {got:?}"),
            });
        }
        let (dtype, bytes) = weights.read_raw(name)?;
        Self::from_stored(dtype, bytes, rows, cols)
    }

    /// The matrix widened to f16 (f32 where f16 cannot hold it; itself if it is either).
    pub fn widened(self) -> Self {
        match self.format {
            WeightFormat::F16 | WeightFormat::F32 => self,
            _ => Self::from_f32(&self.to_f32(), self.rows, self.cols),
        }
    }

    /// `parts` stacked (gate rows, then as many up rows, as separate or fused tensors) with
    /// the two halves' rows interleaved: gate 0, up 0, gate 1, ... (for a gated activation in
    /// the matrix kernels' epilogue). `None` if the parts differ in format or width.
    pub fn paired(parts: &[HostMatrix]) -> Option<Self> {
        let first = parts.first()?;
        if parts
            .iter()
            .any(|p| p.format != first.format || p.cols != first.cols)
        {
            return None;
        }
        let rows: usize = parts.iter().map(|p| p.rows).sum();
        if !rows.is_multiple_of(2) {
            return None;
        }
        let stacked: Vec<u8> = parts.iter().flat_map(|p| p.bytes.iter().copied()).collect();
        let row = first.format.row_bytes(first.cols);
        let (gate, up) = stacked.split_at(rows / 2 * row);
        let bytes = (gate.chunks_exact(row).zip(up.chunks_exact(row)))
            .flat_map(|(g, u)| g.iter().chain(u).copied())
            .collect();
        Some(Self {
            format: first.format,
            rows,
            cols: first.cols,
            bytes,
        })
    }

    /// The matrix with its rows reordered: row `r` is this one's row `src(r)` (whole rows,
    /// blocks included). `src` must be a permutation of the rows.
    pub fn reorder_rows(&self, src: impl Fn(usize) -> usize) -> Self {
        let row = self.format.row_bytes(self.cols);
        let bytes = (0..self.rows)
            .flat_map(|r| &self.bytes[src(r) * row..(src(r) + 1) * row])
            .copied()
            .collect();
        Self {
            format: self.format,
            rows: self.rows,
            cols: self.cols,
            bytes,
        }
    }

    /// The values as f32 (what the kernels compute with, up to rounding).
    pub fn to_f32(&self) -> Vec<f32> {
        dequant::to_f32(self.format.dtype(), &self.bytes)
    }

    /// Rows `start..start + n` in the GPU layout: quants of every block, then the scales of
    /// every block (padded to a whole u32; Q3_K's in pairs of blocks, [`q3_k_pairs`]). Returns
    /// the bytes and the scales' offset in u32s.
    pub fn gpu_chunk(&self, start: usize, n: usize) -> (Vec<u8>, u32) {
        let row = self.format.row_bytes(self.cols);
        let src = &self.bytes[start * row..(start + n) * row];
        let (s0, len, pad) = self.format.scales();
        if len == 0 {
            return (src.to_vec(), 0);
        }
        let block = self.format.dtype().block_bytes();
        let mut quants = Vec::with_capacity(src.len().next_multiple_of(4));
        let mut scales = Vec::with_capacity(src.len() / block * (len + pad));
        for b in src.chunks_exact(block) {
            scales.extend_from_slice(&b[s0..s0 + len]);
            scales.extend(std::iter::repeat_n(0, pad));
            quants.extend_from_slice(&b[..s0]);
            quants.extend_from_slice(&b[s0 + len..]);
        }
        if self.format == WeightFormat::Q3_K {
            scales = q3_k_pairs(&scales);
        }
        let offset = (quants.len() / 4) as u32;
        quants.extend(scales);
        quants.resize(quants.len().next_multiple_of(4), 0);
        (quants, offset)
    }
}

/// Q3_K's scale records (12 bytes of packed scales and an f16 `d` a block) regrouped by pairs
/// of blocks into 7 whole words, so that the kernels read them with aligned loads: the first
/// block's 12 bytes, the second's, then both `d`s (a last, unpaired block padded with zeros).
fn q3_k_pairs(records: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len().div_ceil(28) * 28);
    for pair in records.chunks(28) {
        let (a, b) = pair.split_at(14);
        let b = if b.is_empty() { &[0u8; 14][..] } else { b };
        out.extend_from_slice(&a[..12]);
        out.extend_from_slice(&b[..12]);
        out.extend_from_slice(&a[12..]);
        out.extend_from_slice(&b[12..]);
    }
    out
}

/// The format matrix `name` of `weights` takes on the GPU: its own, f16 where `storage` widens
/// quantized ones, and f32 for a wider float matrix with values beyond f16's range.
pub fn gpu_format(
    weights: &Weights,
    name: &str,
    storage: WeightStorage,
) -> Result<WeightFormat, GpuError> {
    let dtype = weights.dtype(name)?;
    if matches!(dtype, DType::F32 | DType::BF16) && beyond_f16(&weights.read_f32(name)?) {
        return Ok(WeightFormat::F32);
    }
    Ok(match WeightFormat::for_dtype(dtype) {
        f @ (WeightFormat::F16 | WeightFormat::F32) => f,
        _ if !storage.keeps_quantized() => WeightFormat::F16,
        f => f,
    })
}

/// Bytes the tensors of `weights` take on the GPU, tensor by tensor (matrices in their
/// [`WeightFormat`], or f16 where `storage` widens quantized ones; vectors as f32), and the
/// names of the types widened to f16 on the way.
pub fn gpu_weight_bytes(
    weights: &Weights,
    storage: WeightStorage,
) -> Result<(u64, Vec<String>), GpuError> {
    let mut bytes = 0u64;
    let mut widened = Vec::new();
    for name in weights.names() {
        let (dtype, shape) = (weights.dtype(name)?, weights.shape(name)?);
        let numel: usize = shape.iter().product();
        bytes += match shape.as_slice() {
            [rows, cols] => {
                let format = gpu_format(weights, name, storage)?;
                if format.dtype() != dtype && !widened.contains(&dtype.name()) {
                    widened.push(dtype.name());
                }
                (format.gpu_row_bytes(*cols) * rows) as u64
            }
            _ => numel as u64 * 4,
        };
    }
    Ok((bytes, widened))
}
