//! The KV cache's element type and layout, and every byte count derived from them: the one
//! place that knows how many bytes a token, a block or the whole pool of K and V takes.
//!
//! Layout: per layer one K and one V buffer of `num_blocks * BLOCK_SIZE` slots, each slot
//! `(kv_heads, head_dim)` elements, row-major. f16 elements are stored as pairs of halves in
//! one `u32` (element `2i` in the low half, `2i + 1` in the high half, WGSL's `pack2x16float`),
//! so the cache needs no `shader-f16` feature and runs in the browser too; the kernels widen to
//! f32 as they read. f32 elements are stored as their bits, one per `u32`. fp8 elements are
//! bytes in the E4M3 format (`fp8.rs`), four to a `u32` with element `4i` in the lowest byte.

use std::fmt;
use std::str::FromStr;

use kiln_core::BLOCK_SIZE;
use kiln_model::ModelConfig;

use crate::fp8;

/// The element type of the KV cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// Half precision, two elements per `u32`: twice the tokens of f32 in the same memory.
    #[default]
    F16,
    F32,
    /// 8-bit floats (E4M3: 3 mantissa bits, finite values up to 448, no scale), four
    /// elements per `u32`: twice the tokens of f16. K and V values beyond +-448 are
    /// saturated there.
    Fp8,
}

impl KvDtype {
    /// `f16`, `f32` or `fp8`.
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F16 => "f16",
            KvDtype::F32 => "f32",
            KvDtype::Fp8 => "fp8",
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            KvDtype::F16 => 2,
            KvDtype::F32 => 4,
            KvDtype::Fp8 => 1,
        }
    }

    /// Elements per `u32` word of the cache.
    pub fn per_word(self) -> usize {
        4 / self.bytes() as usize
    }

    /// `values` as cache words: f16 pairs (low half first), f32 bits or fp8 quadruples (lowest
    /// byte first). A count that does not fill the last word is padded with zeros.
    pub fn encode(self, values: &[f32]) -> Vec<u32> {
        match self {
            KvDtype::Fp8 => values
                .chunks(4)
                .map(|q| {
                    q.iter()
                        .enumerate()
                        .fold(0, |w, (i, v)| w | (fp8::encode(*v) as u32) << (8 * i))
                })
                .collect(),
            KvDtype::F32 => values.iter().map(|v| v.to_bits()).collect(),
            KvDtype::F16 => values
                .chunks(2)
                .map(|p| {
                    let h = |v: Option<&f32>| {
                        half::f16::from_f32(v.copied().unwrap_or(0.0)).to_bits() as u32
                    };
                    h(p.first()) | h(p.get(1)) << 16
                })
                .collect(),
        }
    }

    /// Cache words back to f32 values (the inverse of [`Self::encode`]).
    pub fn decode(self, words: &[u32]) -> Vec<f32> {
        match self {
            KvDtype::Fp8 => words
                .iter()
                .flat_map(|w| w.to_le_bytes().map(fp8::decode))
                .collect(),
            KvDtype::F32 => words.iter().map(|w| f32::from_bits(*w)).collect(),
            KvDtype::F16 => words
                .iter()
                .flat_map(|w| {
                    [*w as u16, (*w >> 16) as u16].map(|b| half::f16::from_bits(b).to_f32())
                })
                .collect(),
        }
    }

    /// `values` as the cache holds them: each value through [`Self::encode`] and back.
    pub fn round(self, values: &[f32]) -> Vec<f32> {
        let mut v = self.decode(&self.encode(values));
        v.truncate(values.len());
        v
    }

    /// The value of the kernels' `KV_BITS` override constant: bits per element.
    pub(crate) fn override_constant(self) -> (&'static str, f64) {
        ("KV_BITS", 8.0 * self.bytes() as f64)
    }
}

impl fmt::Display for KvDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KvDtype {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f16" => Ok(KvDtype::F16),
            "f32" => Ok(KvDtype::F32),
            "fp8" | "fp8_e4m3" => Ok(KvDtype::Fp8),
            _ => Err(format!(
                "unknown KV cache type `{s}`: expected f16, f32 or fp8 (fp8_e4m3)"
            )),
        }
    }
}

/// The shape of a model's KV cache and its element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    pub dtype: KvDtype,
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl KvLayout {
    pub fn new(layers: usize, kv_heads: usize, head_dim: usize, dtype: KvDtype) -> Self {
        Self {
            dtype,
            layers,
            kv_heads,
            head_dim,
        }
    }

    pub fn for_model(config: &ModelConfig, dtype: KvDtype) -> Self {
        Self::new(
            config.num_layers,
            config.num_kv_heads,
            config.head_dim,
            dtype,
        )
    }

    /// Elements of one token's K (or V) in one layer.
    pub fn slot_elements(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Bytes of one token's K (or V) in one layer.
    pub fn slot_bytes(&self) -> u64 {
        self.slot_elements() as u64 * self.dtype.bytes()
    }

    /// Bytes of one block in one layer's K (or V) buffer.
    pub fn block_bytes(&self) -> u64 {
        BLOCK_SIZE as u64 * self.slot_bytes()
    }

    /// Bytes of one block across all layers, K and V.
    pub fn bytes_per_block(&self) -> u64 {
        self.block_bytes() * 2 * self.layers as u64
    }

    /// Bytes of one token across all layers, K and V.
    pub fn bytes_per_token(&self) -> u64 {
        self.slot_bytes() * 2 * self.layers as u64
    }

    /// Blocks that `bytes` of memory hold (all layers, K and V).
    pub fn blocks_in(&self, bytes: u64) -> usize {
        (bytes / self.bytes_per_block().max(1)) as usize
    }

    /// Most blocks one layer's K buffer can have when it must fit one storage binding of
    /// `max_binding` bytes.
    pub fn max_blocks(&self, max_binding: u64) -> usize {
        (max_binding / self.block_bytes().max(1)) as usize
    }

    /// Bytes of one layer's K (or V) buffer of `num_blocks` blocks.
    pub fn buffer_bytes(&self, num_blocks: usize) -> u64 {
        self.block_bytes() * num_blocks as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_holds_twice_the_blocks() {
        let f32 = KvLayout::new(30, 3, 64, KvDtype::F32);
        let f16 = KvLayout {
            dtype: KvDtype::F16,
            ..f32
        };
        assert_eq!(f32.slot_bytes(), 3 * 64 * 4);
        assert_eq!(f32.block_bytes(), BLOCK_SIZE as u64 * 3 * 64 * 4);
        assert_eq!(f32.bytes_per_block(), f32.block_bytes() * 60);
        assert_eq!(f16.bytes_per_token() * 2, f32.bytes_per_token());
        let mem = 1000 * f32.bytes_per_block() + 1;
        assert_eq!((f32.blocks_in(mem), f16.blocks_in(mem)), (1000, 2000));
        assert_eq!(f32.max_blocks(128 << 20), (128 << 20) / (16 * 3 * 64 * 4));
        assert_eq!(f16.max_blocks(128 << 20), (128 << 20) / (16 * 3 * 64 * 2));
    }

    #[test]
    fn encodes_and_decodes() {
        let v = [1.0f32, -2.5, 0.1, 65504.0];
        assert_eq!(KvDtype::F32.decode(&KvDtype::F32.encode(&v)), v);
        let h = KvDtype::F16.encode(&v);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0], 0x3c00 | 0xc100 << 16);
        let back = KvDtype::F16.decode(&h);
        assert_eq!((back[0], back[1], back[3]), (1.0, -2.5, 65504.0));
        assert!((back[2] - 0.1).abs() < 1e-4);
        let q = KvDtype::Fp8.encode(&[1.0, -2.5, 0.1, 500.0, 3.0]);
        assert_eq!(q, vec![0x38 | 0xc2 << 8 | 0x1d << 16 | 0x7e << 24, 0x44]);
        assert_eq!(
            KvDtype::Fp8.round(&[1.0, -2.5, 0.1, 500.0, 3.0]),
            [1.0, -2.5, 0.1015625, 448.0, 3.0]
        );
    }

    #[test]
    fn fp8_holds_twice_the_blocks_of_f16() {
        let f16 = KvLayout::new(30, 3, 64, KvDtype::F16);
        let fp8 = KvLayout {
            dtype: KvDtype::Fp8,
            ..f16
        };
        assert_eq!(fp8.slot_bytes() * 2, f16.slot_bytes());
        let mem = 1000 * f16.bytes_per_block() + 1;
        assert_eq!(fp8.blocks_in(mem), 2000);
        assert_eq!(KvDtype::Fp8.per_word(), 4);
    }

    #[test]
    fn parses_names() {
        assert_eq!("f16".parse::<KvDtype>(), Ok(KvDtype::F16));
        assert_eq!("f32".parse::<KvDtype>(), Ok(KvDtype::F32));
        assert_eq!("fp8".parse::<KvDtype>(), Ok(KvDtype::Fp8));
        assert_eq!("fp8_e4m3".parse::<KvDtype>(), Ok(KvDtype::Fp8));
        assert!("bf16".parse::<KvDtype>().is_err());
        assert!("fp8_e5m2".parse::<KvDtype>().is_err());
    }
}
