//! Element types a tensor can be stored in, and their conversion to f32
//! (plain floats, and the GGML block formats Q8_0 / Q4_0 / Q4_1, 32 elements per block).

use half::{bf16, f16};

/// Storage type of a tensor in a model file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
}

/// Elements per quantization block.
pub const QK: usize = 32;

impl DType {
    /// Bytes needed for `numel` elements (`numel` must be a multiple of 32 for block types).
    pub fn byte_len(self, numel: usize) -> usize {
        match self {
            DType::F32 => numel * 4,
            DType::F16 | DType::BF16 => numel * 2,
            DType::Q8_0 => numel / QK * 34,
            DType::Q4_0 => numel / QK * 18,
            DType::Q4_1 => numel / QK * 20,
        }
    }

    pub fn is_quantized(self) -> bool {
        matches!(self, DType::Q8_0 | DType::Q4_0 | DType::Q4_1)
    }

    /// GGML type id as stored in GGUF files.
    pub fn ggml_id(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q8_0 => 8,
            DType::BF16 => 30,
        }
    }

    /// The supported type for a GGML type id, or the type's name for error messages.
    pub fn from_ggml_id(id: u32) -> Result<DType, String> {
        Ok(match id {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::Q4_0,
            3 => DType::Q4_1,
            8 => DType::Q8_0,
            30 => DType::BF16,
            _ => return Err(ggml_type_name(id)),
        })
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

fn f16_at(b: &[u8], i: usize) -> f32 {
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
