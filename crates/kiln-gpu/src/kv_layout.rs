//! The KV cache's element type and layout, and every byte count derived from them: the one
//! place that knows how many bytes a token, a block or the whole pool of K and V takes.
//!
//! Layout: per layer one K and one V buffer of `num_blocks` blocks of `BLOCK_SIZE` slots,
//! each slot a row of `(kv_heads, head_dim)` elements. f16 elements are stored as pairs of
//! halves in one `u32` (element `2i` in the low half, `2i + 1` in the high half, WGSL's
//! `pack2x16float`), so the cache needs no `shader-f16` feature and runs in the browser too;
//! the kernels widen to f32 as they read. f32 elements are stored as their bits, one per
//! `u32`. fp8 elements are bytes in the E4M3 format (`fp8.rs`), four to a `u32` with element
//! `4i` in the lowest byte. q8_0 elements are signed bytes, packed as fp8's, with an f16
//! scale per group of 32 (`q8.rs`): a block is its 16 slots' rows of bytes and then one row
//! of the same size holding their scales (slot `i`'s `row / 32` scales at halves
//! `i * row / 32..`, in pairs as f16 is), so a block stays one contiguous run of bytes for
//! the copies between tiers and servers.

use std::fmt;
use std::str::FromStr;

use kiln_core::BLOCK_SIZE;
use kiln_model::ModelConfig;

use crate::{fp8, q8};

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
    /// Signed bytes with an f16 scale per 32 elements (GGUF's Q8_0 numbers): 1.88x the
    /// tokens of f16, and within half a step (1/254 of a group's largest value) of each value.
    Q8,
}

impl KvDtype {
    /// `f16`, `f32`, `fp8` or `q8_0`.
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F16 => "f16",
            KvDtype::F32 => "f32",
            KvDtype::Fp8 => "fp8",
            KvDtype::Q8 => "q8_0",
        }
    }

    /// Bytes of one element (without q8_0's scales).
    pub fn bytes(self) -> u64 {
        match self {
            KvDtype::F16 => 2,
            KvDtype::F32 => 4,
            KvDtype::Fp8 | KvDtype::Q8 => 1,
        }
    }

    /// Elements per `u32` word of the cache.
    pub fn per_word(self) -> usize {
        4 / self.bytes() as usize
    }

    /// Elements a slot's row must hold a multiple of: whole words, and for q8_0 whole pairs
    /// of groups (so that each slot's scales are whole words).
    pub fn row_multiple(self) -> usize {
        match self {
            KvDtype::Q8 => 2 * q8::GROUP,
            d => d.per_word(),
        }
    }

    /// `values` as the cache gives them back: each value through its encoding and back (for
    /// q8_0, `values` is a whole number of groups, as a slot's row is).
    pub fn round(self, values: &[f32]) -> Vec<f32> {
        match self {
            KvDtype::F32 => values.to_vec(),
            KvDtype::F16 => (values.iter())
                .map(|v| half::f16::from_f32(*v).to_f32())
                .collect(),
            KvDtype::Fp8 => values
                .iter()
                .map(|v| fp8::decode(fp8::encode(*v)))
                .collect(),
            KvDtype::Q8 => q8::round(values),
        }
    }

    /// The value of the kernels' `KV_TYPE` override constant (`shaders/kv_codec.wgsl`).
    pub(crate) fn override_constant(self) -> (&'static str, f64) {
        let code = match self {
            KvDtype::F32 => 0.0,
            KvDtype::F16 => 1.0,
            KvDtype::Fp8 => 2.0,
            KvDtype::Q8 => 3.0,
        };
        ("KV_TYPE", code)
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
            "q8_0" => Ok(KvDtype::Q8),
            _ => Err(format!(
                "unknown KV cache type `{s}`: expected f16, f32, q8_0 or fp8 (fp8_e4m3)"
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

    /// Why this cache type cannot hold this model's rows, if it cannot.
    pub fn unfit(&self) -> Option<String> {
        let m = self.dtype.row_multiple();
        (!self.slot_elements().is_multiple_of(m)).then(|| {
            format!(
                "a {} KV cache needs KV heads x head size ({} x {}) to be a multiple of {m}",
                self.dtype, self.kv_heads, self.head_dim
            )
        })
    }

    /// Bytes of one slot's row of elements.
    fn row_bytes(&self) -> u64 {
        self.slot_elements() as u64 * self.dtype.bytes()
    }

    /// Bytes of one block in one layer's K (or V) buffer: its slots' rows, and for q8_0 a
    /// row of their scales.
    pub fn block_bytes(&self) -> u64 {
        let rows = BLOCK_SIZE + usize::from(self.dtype == KvDtype::Q8);
        rows as u64 * self.row_bytes()
    }

    /// Bytes of one token's K (or V) in one layer (its share of a block).
    pub fn slot_bytes(&self) -> u64 {
        self.block_bytes() / BLOCK_SIZE as u64
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

    /// One layer's K (or V) values, slot after slot (a whole number of blocks for q8_0), as
    /// the buffer's words.
    pub fn encode(&self, values: &[f32]) -> Vec<u32> {
        let bytes: Vec<u8> = match self.dtype {
            KvDtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            KvDtype::F16 => (values.iter())
                .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                .collect(),
            KvDtype::Fp8 => values.iter().map(|v| fp8::encode(*v)).collect(),
            KvDtype::Q8 => {
                let row = self.slot_elements();
                assert!(
                    values.len().is_multiple_of(BLOCK_SIZE * row),
                    "whole blocks"
                );
                (values.chunks(BLOCK_SIZE * row))
                    .flat_map(|block| {
                        let groups = || block.chunks(q8::GROUP).map(|g| (g, q8::scale(g)));
                        let data = groups()
                            .flat_map(|(g, s)| g.iter().map(move |v| q8::quantize(*v, s) as u8));
                        let scales = groups().flat_map(|(_, s)| s.to_le_bytes());
                        data.chain(scales).collect::<Vec<u8>>()
                    })
                    .collect()
            }
        };
        (bytes.chunks(4))
            .map(|w| {
                let mut b = [0u8; 4];
                b[..w.len()].copy_from_slice(w);
                u32::from_le_bytes(b)
            })
            .collect()
    }

    /// A layer's K (or V) buffer's words back to values (the inverse of [`Self::encode`]).
    pub fn decode(&self, words: &[u32]) -> Vec<f32> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        match self.dtype {
            KvDtype::F32 => (bytes.chunks_exact(4))
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            KvDtype::F16 => (bytes.chunks_exact(2))
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            KvDtype::Fp8 => bytes.iter().map(|b| fp8::decode(*b)).collect(),
            KvDtype::Q8 => {
                let row = self.slot_elements();
                (bytes.chunks_exact(self.block_bytes() as usize))
                    .flat_map(|block| {
                        let (data, scales) = block.split_at(BLOCK_SIZE * row);
                        (data.chunks(q8::GROUP).zip(scales.chunks_exact(2))).flat_map(|(g, s)| {
                            let s = half::f16::from_le_bytes([s[0], s[1]]).to_f32();
                            g.iter().map(move |b| *b as i8 as f32 * s)
                        })
                    })
                    .collect()
            }
        }
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
        let layout = |dtype| KvLayout::new(1, 1, 4, dtype);
        let v = [1.0f32, -2.5, 0.1, 65504.0];
        let f32 = layout(KvDtype::F32);
        assert_eq!(f32.decode(&f32.encode(&v)), v);
        let f16 = layout(KvDtype::F16);
        let h = f16.encode(&v);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0], 0x3c00 | 0xc100 << 16);
        let back = f16.decode(&h);
        assert_eq!((back[0], back[1], back[3]), (1.0, -2.5, 65504.0));
        assert!((back[2] - 0.1).abs() < 1e-4);
        assert_eq!(back, KvDtype::F16.round(&v));
        let fp8 = KvLayout::new(1, 1, 8, KvDtype::Fp8);
        let v = [1.0, -2.5, 0.1, 500.0, 3.0, 0.0, 0.0, 0.0];
        let q = fp8.encode(&v);
        assert_eq!(q, vec![0x38 | 0xc2 << 8 | 0x1d << 16 | 0x7e << 24, 0x44]);
        let rounded = [1.0, -2.5, 0.1015625, 448.0, 3.0, 0.0, 0.0, 0.0];
        assert_eq!(KvDtype::Fp8.round(&v), rounded);
        assert_eq!(fp8.decode(&q), rounded);
    }

    #[test]
    fn q8_blocks_hold_their_scales_after_their_rows() {
        let layout = KvLayout::new(2, 2, 32, KvDtype::Q8);
        assert_eq!(layout.block_bytes(), 17 * 64);
        assert_eq!(layout.slot_bytes(), 68);
        let v: Vec<f32> = (0..2 * BLOCK_SIZE * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01 * (1 + i / 32 % 5) as f32)
            .collect();
        let words = layout.encode(&v);
        assert_eq!(words.len() as u64 * 4, 2 * layout.block_bytes());
        assert_eq!(layout.decode(&words), KvDtype::Q8.round(&v));
        // Slot 1's first group: its bytes at row 1, its scale the block's 34th half.
        let s = q8::scale(&v[64..96]);
        let scale_word = words[(16 * 64 + 2 * 2) / 4];
        assert_eq!(scale_word & 0xffff, s.to_bits() as u32);
        assert_eq!(
            words[16] as u8 as i8,
            q8::quantize(v[64], s),
            "slot 1's first element"
        );
        assert!(KvLayout::new(1, 3, 32, KvDtype::Q8).unfit().is_some());
        assert!(KvLayout::new(1, 3, 64, KvDtype::Q8).unfit().is_none());
        assert!(KvLayout::new(1, 1, 6, KvDtype::Fp8).unfit().is_some());
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
        assert_eq!("q8_0".parse::<KvDtype>(), Ok(KvDtype::Q8));
    }
}
