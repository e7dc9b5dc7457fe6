//! Random models at full size (billions of parameters) for speed measurements: f16 weights
//! streamed to a safetensors file, or block-quantized ones to a GGUF file, from a cheap
//! generator, never held in memory as a whole.
//! The values are only plausible (weights in ±[1/16, 1/8), norm gains near 1); the tiny models
//! in `mod.rs` are the ones with reference outputs.

use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::json;

use super::gguf_builder::TensorSpec;
use super::gguf_writer::{model_gguf, stored_type};
use super::{TinyConfig, io, quantize, tiny_tokenizer, write_folder_files};
use crate::gguf::names::hf_to_gguf_name;
use crate::{DType, ModelConfig, ModelError};

/// Writes a Hugging Face folder like `write_tiny_llama` with random f16 weights in `cfg`'s
/// shapes (`cfg.dtype` is ignored), at disk speed.
pub fn write_random_llama(
    dir: &Path,
    cfg: &TinyConfig,
    seed: u64,
) -> Result<ModelConfig, ModelError> {
    let mc = write_folder_files(dir, cfg)?;
    let tensors = crate::validate::expected_tensors(&mc);
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut offset = 0usize;
    for (name, shape) in &tensors {
        let bytes = 2 * shape.iter().product::<usize>();
        header.insert(
            name.clone(),
            json!({"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut h = serde_json::to_vec(&header).expect("json");
    h.resize(h.len().div_ceil(8) * 8, b' ');

    let path = dir.join("model.safetensors");
    let file = std::fs::File::create(&path).map_err(io(&path))?;
    let mut out = BufWriter::with_capacity(1 << 22, file);
    let mut write = |bytes: &[u8]| out.write_all(bytes).map_err(io(&path));
    write(&(h.len() as u64).to_le_bytes())?;
    write(&h)?;
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut chunk = vec![0u8; 1 << 22];
    for (name, shape) in &tensors {
        let is_norm = name.ends_with("norm.weight");
        let mut left = 2 * shape.iter().product::<usize>();
        while left > 0 {
            let n = left.min(chunk.len());
            for word in chunk[..n].chunks_mut(8) {
                let r = splitmix64(&mut state);
                for (i, half) in word.chunks_mut(2).enumerate() {
                    let bits = (r >> (16 * i)) as u16;
                    half.copy_from_slice(&random_f16(bits, is_norm).to_le_bytes());
                }
            }
            write(&chunk[..n])?;
            left -= n;
        }
    }
    out.flush().map_err(io(&path))?;
    Ok(mc)
}

/// Writes a GGUF file in `cfg`'s shapes whose matrices are `dtype` blocks (norm gains F32 near
/// 1, as llama.cpp stores them), with the tiny tokenizer padded to the vocabulary. The blocks
/// are copies of a pool of 4,096 blocks quantized from random values (weights in
/// ±[1/16, 1/8)), taken in a random order: real scales and codes at disk speed.
pub fn write_random_gguf(
    path: &Path,
    cfg: &TinyConfig,
    dtype: DType,
    seed: u64,
) -> Result<ModelConfig, ModelError> {
    let mc = cfg.model_config();
    let specs: Vec<TensorSpec> = crate::validate::expected_tensors(&mc)
        .into_iter()
        .map(|(name, shape)| {
            let ty = stored_type(&shape, dtype);
            TensorSpec {
                name: hf_to_gguf_name(&name, mc.architecture),
                dims: shape.iter().rev().map(|&d| d as u64).collect(),
                ggml_type: ty.ggml_id(),
                bytes: ty.byte_len(shape.iter().product()),
            }
        })
        .collect();
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut random = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                f32::from(half::f16::from_bits(random_f16(
                    splitmix64(&mut state) as u16,
                    false,
                )))
            })
            .collect()
    };
    let block = dtype.block_bytes();
    let pool = quantize(dtype, &random(4096 * dtype.block_size()));
    let tokenizer = tiny_tokenizer::gguf_tokenizer();
    let mut pick = seed;
    // Pieces of whole blocks, so that every piece of a matrix starts at a block.
    let piece = block * 4096;
    model_gguf(&mc, &[], dtype, &tokenizer).write_streamed(path, &specs, piece, |i, out| {
        if specs[i].ggml_type == DType::F32.ggml_id() {
            for (k, v) in out.chunks_mut(4).enumerate() {
                v.copy_from_slice(&(1.0 + (k % 7) as f32 / 64.0).to_le_bytes());
            }
        } else {
            for b in out.chunks_mut(block) {
                let at = (splitmix64(&mut pick) % 4096) as usize * block;
                b.copy_from_slice(&pool[at..at + block]);
            }
        }
    })?;
    Ok(mc)
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An f16 from 16 random bits: a random sign and mantissa with the exponent of [1/16, 1/8)
/// for weights, or of [1, 2) with a small mantissa for norm gains.
fn random_f16(bits: u16, is_norm: bool) -> u16 {
    if is_norm {
        (15 << 10) | (bits & 0x3f)
    } else {
        (bits & 0x8000) | (11 << 10) | (bits & 0x3ff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Model;

    #[test]
    fn writes_a_loadable_model_with_bounded_values() {
        let dir = std::env::temp_dir().join(format!("kiln-random-model-{}", std::process::id()));
        let cfg = TinyConfig {
            num_layers: 1,
            ..TinyConfig::default()
        };
        let mc = write_random_llama(&dir, &cfg, 3).unwrap();
        let model = Model::load(&dir).unwrap();
        assert_eq!(model.config, mc);
        let q = model
            .weights
            .read_f32("model.layers.0.self_attn.q_proj.weight")
            .unwrap();
        assert_eq!(q.len(), mc.num_heads * mc.head_dim * mc.hidden_size);
        assert!(q.iter().all(|v| (0.0625..0.125).contains(&v.abs())));
        // Not a constant: both signs and many distinct values.
        assert!(q.iter().any(|&v| v < 0.0) && q.iter().any(|&v| v > 0.0));
        let distinct: std::collections::HashSet<u32> = q.iter().map(|v| v.to_bits()).collect();
        assert!(distinct.len() > 1000);
        let norm = model.weights.read_f32("model.norm.weight").unwrap();
        assert!(norm.iter().all(|v| (1.0..1.1).contains(v)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_a_loadable_quantized_gguf() {
        let dir = std::env::temp_dir().join(format!("kiln-random-gguf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = TinyConfig {
            num_layers: 1,
            hidden_size: 256,
            intermediate_size: 512,
            ..TinyConfig::default()
        };
        for dtype in [DType::Q4_K, DType::Q8_0] {
            let path = dir.join(format!("{dtype:?}.gguf"));
            let mc = write_random_gguf(&path, &cfg, dtype, 5).unwrap();
            let model = Model::load(&path).unwrap();
            assert_eq!(model.config.hidden_size, mc.hidden_size);
            assert_eq!(model.config.vocab_size, mc.vocab_size);
            let name = "model.layers.0.mlp.down_proj.weight";
            assert_eq!(model.weights.dtype(name).unwrap(), dtype);
            let w = model.weights.read_f32(name).unwrap();
            assert_eq!(w.len(), mc.hidden_size * mc.intermediate_size);
            // Quantized from ±[1/16, 1/8): within a block's rounding of that range, varied.
            assert!(w.iter().all(|v| v.abs() < 0.14), "{dtype:?}");
            assert!(w.iter().any(|&v| v < -0.05) && w.iter().any(|&v| v > 0.05));
            let norm = model.weights.read_f32("model.norm.weight").unwrap();
            assert!(norm.iter().all(|v| (1.0..1.1).contains(v)));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
