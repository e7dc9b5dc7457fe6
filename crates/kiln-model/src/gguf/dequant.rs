//! Element types a tensor can be stored in, and their conversion to f32: plain floats, the
//! 32-element GGML blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) here, the 256-element K-quant
//! super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) in `kquant`, the 4-bit types whose levels are
//! not evenly spaced (MXFP4, IQ4_NL, IQ4_XS) in `nonlinear`.

use half::{bf16, f16};

use super::{kquant, nonlinear};

/// Storage type of a tensor in a model file (variants spelled as GGML names them).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    /// OCP microscaling FP4: 4-bit E2M1 values with a power-of-two (E8M0) scale a block.
    MXFP4,
    /// Blocks of 32 nibbles indexing 16 fixed non-uniform levels, an f16 scale a block.
    IQ4_NL,
    /// Super-blocks of 256: IQ4_NL's levels with a 6-bit scale per 32 under an f16 one.
    IQ4_XS,
}

/// Elements per block of the 32-element types.
pub const QK: usize = 32;
/// Elements per K-quant super-block.
pub const QK_K: usize = 256;

impl DType {
    /// Every supported type.
    pub const ALL: [DType; 16] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::MXFP4,
        DType::IQ4_NL,
        DType::IQ4_XS,
    ];

    /// Elements per block (1 for plain floats).
    pub fn block_size(self) -> usize {
        match self {
            DType::F32 | DType::F16 | DType::BF16 => 1,
            DType::Q8_0
            | DType::Q4_0
            | DType::Q4_1
            | DType::Q5_0
            | DType::Q5_1
            | DType::MXFP4
            | DType::IQ4_NL => QK,
            DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::IQ4_XS => {
                QK_K
            }
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Q8_0 => 34,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q2_K => 84,
            DType::Q3_K => 110,
            DType::Q4_K => 144,
            DType::Q5_K => 176,
            DType::Q6_K => 210,
            DType::MXFP4 => 17,
            DType::IQ4_NL => 18,
            DType::IQ4_XS => 136,
        }
    }

    /// Bytes needed for `numel` elements (`numel` must be a multiple of the block size).
    pub fn byte_len(self, numel: usize) -> usize {
        numel / self.block_size() * self.block_bytes()
    }

    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// GGML type id as stored in GGUF files.
    pub fn ggml_id(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q5_0 => 6,
            DType::Q5_1 => 7,
            DType::Q8_0 => 8,
            DType::Q2_K => 10,
            DType::Q3_K => 11,
            DType::Q4_K => 12,
            DType::Q5_K => 13,
            DType::Q6_K => 14,
            DType::BF16 => 30,
            DType::MXFP4 => 39,
            DType::IQ4_NL => 20,
            DType::IQ4_XS => 23,
        }
    }

    /// The supported type for a GGML type id, or the type's name for error messages.
    pub fn from_ggml_id(id: u32) -> Result<DType, String> {
        DType::ALL
            .into_iter()
            .find(|d| d.ggml_id() == id)
            .ok_or_else(|| ggml_type_name(id))
    }

    /// The GGML name ("Q4_K", "F16", ...).
    pub fn name(self) -> String {
        ggml_type_name(self.ggml_id())
    }
}

/// Human-readable GGML type name (for "unsupported type" errors).
pub fn ggml_type_name(id: u32) -> String {
    let name = match id {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        30 => "BF16",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return format!("GGML type {id}"),
    };
    name.to_string()
}

pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Converts `bytes` (exactly `dtype.byte_len(numel)` long) to f32.
pub fn to_f32(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::Q8_0 => dequant_q8_0(bytes),
        DType::Q4_0 => dequant_q4_0(bytes),
        DType::Q4_1 => dequant_q4_1(bytes),
        DType::Q5_0 => dequant_q5(bytes, false),
        DType::Q5_1 => dequant_q5(bytes, true),
        DType::Q2_K => kquant::dequant_q2_k(bytes),
        DType::Q3_K => kquant::dequant_q3_k(bytes),
        DType::Q4_K => kquant::dequant_q4_k(bytes),
        DType::Q5_K => kquant::dequant_q5_k(bytes),
        DType::Q6_K => kquant::dequant_q6_k(bytes),
        DType::MXFP4 => nonlinear::dequant_mxfp4(bytes),
        DType::IQ4_NL => nonlinear::dequant_iq4_nl(bytes),
        DType::IQ4_XS => nonlinear::dequant_iq4_xs(bytes),
    }
}

/// Q8_0 block: f16 scale `d`, then 32 signed bytes; value = q * d.
pub fn dequant_q8_0(bytes: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(bytes.len() / 34 * QK);
    for b in bytes.chunks_exact(34) {
        let d = f16_at(b, 0);
        out.extend(b[2..34].iter().map(|&q| (q as i8) as f32 * d));
    }
    out
}

/// Q4_0 block: f16 scale `d`, 16 bytes; low nibbles are elements 0..16, high nibbles 16..32;
/// value = (q - 8) * d.
pub fn dequant_q4_0(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 18 * QK];
    for (b, o) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(QK)) {
        let d = f16_at(b, 0);
        for (j, &q) in b[2..18].iter().enumerate() {
            o[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
            o[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
        }
    }
    out
}

/// Q4_1 block: f16 scale `d`, f16 minimum `m`, 16 bytes (nibble layout as Q4_0); value = q * d + m.
pub fn dequant_q4_1(bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; bytes.len() / 20 * QK];
    for (b, o) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(QK)) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        for (j, &q) in b[4..20].iter().enumerate() {
            o[j] = (q & 0x0F) as f32 * d + m;
            o[j + 16] = (q >> 4) as f32 * d + m;
        }
    }
    out
}

/// Q5_0 block (22 bytes): f16 `d`, a u32 of fifth bits (bit j belongs to element j), 16 nibble
/// bytes as Q4_0; value = (q - 16) * d. Q5_1 (24 bytes) has an f16 minimum `m` after `d` and
/// value = q * d + m.
pub fn dequant_q5(bytes: &[u8], with_min: bool) -> Vec<f32> {
    let (size, hi) = if with_min { (24, 4) } else { (22, 2) };
    let mut out = vec![0f32; bytes.len() / size * QK];
    for (b, o) in bytes.chunks_exact(size).zip(out.chunks_exact_mut(QK)) {
        let d = f16_at(b, 0);
        let (m, offset) = if with_min {
            (f16_at(b, 2), 0)
        } else {
            (0.0, 16)
        };
        let qh = u32::from_le_bytes([b[hi], b[hi + 1], b[hi + 2], b[hi + 3]]);
        for (j, &q) in b[hi + 4..hi + 20].iter().enumerate() {
            let lo = (q & 0x0F) as u32 | ((qh >> j) & 1) << 4;
            let up = (q >> 4) as u32 | ((qh >> (j + 16)) & 1) << 4;
            o[j] = (lo as i32 - offset) as f32 * d + m;
            o[j + 16] = (up as i32 - offset) as f32 * d + m;
        }
    }
    out
}
