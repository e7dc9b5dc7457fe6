//! A GGUF file's RoPE scaling: the kind `rope.scaling.*` names, Phi-3's LongRoPE from its
//! factor tensors, and Llama 3's parameters recovered from a `rope_freqs` tensor.

use super::meta::Meta;
use crate::ModelError;
use crate::config::{Llama3Rope, LongRope, ModelConfig, RopeScaling, Yarn, llama3_scale};

/// The scaling `rope.scaling.*` names: linear, Llama 3's (when its parameters are written;
/// llama.cpp's converter writes a `rope_freqs` tensor instead) or YaRN.
pub(super) fn rope_scaling(meta: &Meta, a: &str) -> Result<Option<RopeScaling>, ModelError> {
    let key = |k: &str| format!("{a}.rope.scaling.{k}");
    let need = |k: &str| {
        meta.f64(&key(k)).ok_or_else(|| {
            let kind = meta.str(&key("type")).unwrap_or_default();
            ModelError::config(meta.file, format!("{kind} rope scaling without {}", key(k)))
        })
    };
    let kind = meta.str(&key("type")).unwrap_or("none");
    Ok(Some(match kind {
        "none" => return Ok(None),
        "linear" => RopeScaling::Linear(need("factor")? as f32),
        "llama3" => {
            let f = |k: &str, d: f64| meta.f64(&key(k)).unwrap_or(d);
            RopeScaling::Llama3(Llama3Rope {
                factor: f("factor", 8.0) as f32,
                low_freq_factor: f("low_freq_factor", 1.0) as f32,
                high_freq_factor: f("high_freq_factor", 4.0) as f32,
                original_max_position_embeddings: f("original_context_length", 8192.0) as usize,
            })
        }
        "yarn" => {
            // DeepSeek's log multiplier and a partial extrapolation mix are not YaRN as the
            // Llama-family configs give it.
            for (k, plain) in [("yarn_log_multiplier", 0.0), ("yarn_ext_factor", 1.0)] {
                if let Some(x) = meta.f64(&key(k)).filter(|&x| x != plain) {
                    return Err(ModelError::Unsupported {
                        file: meta.file.into(),
                        reason: format!("YaRN with {} = {x}", key(k)),
                    });
                }
            }
            let factor = need("factor")?;
            let f = |k: &str, d: f64| meta.f64(&key(k)).unwrap_or(d);
            RopeScaling::Yarn(Yarn {
                factor: factor as f32,
                original_max_position_embeddings: need("original_context_length")? as usize,
                beta_fast: f("yarn_beta_fast", 32.0) as f32,
                beta_slow: f("yarn_beta_slow", 1.0) as f32,
                attention_factor: (f("yarn_attn_factor", 1.0) * Yarn::mscale(factor, 1.0)) as f32,
                truncate: true,
            })
        }
        other => {
            return Err(ModelError::Unsupported {
                file: meta.file.into(),
                reason: format!("rope scaling type \"{other}\""),
            });
        }
    }))
}

/// Phi-3's LongRoPE from its factor tensors (`rope_factors_short`, `rope_factors_long`) and
/// `rope.scaling.*` metadata.
pub(super) fn long_rope(
    meta: &Meta,
    cfg: &ModelConfig,
    (short, long): (Vec<f32>, Vec<f32>),
) -> Result<LongRope, ModelError> {
    let a = cfg.architecture.gguf_name();
    let original = meta
        .usize(&format!("{a}.rope.scaling.original_context_length"))
        .ok_or_else(|| {
            ModelError::config(
                meta.file,
                format!("LongRoPE factors without {a}.rope.scaling.original_context_length"),
            )
        })?;
    let attention_factor = match meta.f64(&format!("{a}.rope.scaling.attn_factor")) {
        Some(f) => f as f32,
        None => LongRope::default_attention_factor(cfg.max_position_embeddings, original),
    };
    Ok(LongRope {
        short_factor: short,
        long_factor: long,
        original_max_position_embeddings: original,
        attention_factor,
    })
}

/// llama.cpp stores Llama 3.x frequency scaling as a `rope_freqs` tensor of per-frequency
/// divisors. Recover the Llama 3 parameters from it (standard low/high factors 1 and 4).
pub(super) fn rope_scaling_from_freqs(
    cfg: &ModelConfig,
    divisors: &[f32],
    original_ctx: Option<usize>,
    file: &str,
) -> Result<Llama3Rope, ModelError> {
    let half = cfg.head_dim / 2;
    let factor = divisors.iter().cloned().fold(1.0f32, f32::max);
    let s = Llama3Rope {
        factor,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: original_ctx.unwrap_or(8192),
    };
    let fits = divisors.len() == half
        && (0..half).all(|i| {
            let inv = 1.0 / (cfg.rope_theta as f64).powf((2 * i) as f64 / cfg.head_dim as f64);
            let want = inv / llama3_scale(inv, &s);
            (want - divisors[i] as f64).abs() <= 1e-3 * want.max(1.0)
        });
    if fits {
        Ok(s)
    } else {
        Err(ModelError::Unsupported {
            file: file.into(),
            reason: "tensor \"rope_freqs.weight\" does not match Llama 3 rope scaling".into(),
        })
    }
}
