//! The rotary embedding of a Hugging Face `config.json`: transformers 4's `rope_theta` and
//! `rope_scaling`, or transformers 5's `rope_parameters` (the base and the scaling in one
//! object, or one object per kind of layer: Gemma 3's `full_attention` and
//! `sliding_attention`).

use serde_json::Value;

use crate::ModelError;
use crate::config::{Llama3Rope, LongRope, RopeScaling, Yarn};

/// The RoPE entries of a config.
pub(super) struct HfRope {
    /// The global layers' base.
    pub theta: f32,
    /// The sliding layers' base where the config gives one of their own (Gemma 3's
    /// `rope_local_base_freq`, or `sliding_attention`'s).
    pub local_theta: Option<f32>,
    pub scaling: Option<RopeScaling>,
}

/// Reads the RoPE entries of config `v` (of a model whose context is `max_pos`). With
/// `alpha_head_dim` (Hunyuan's heads' size), a "dynamic" scaling with an `alpha` is the fixed
/// NTK stretch of the base that Hunyuan's code makes of it: `base * alpha^(d / (d - 2))`.
pub(super) fn rope(
    v: &Value,
    max_pos: usize,
    file: &str,
    alpha_head_dim: Option<usize>,
) -> Result<HfRope, ModelError> {
    let params = v.get("rope_parameters").filter(|p| p.is_object());
    let (global, local) = match params {
        Some(p) if p.get("full_attention").is_some() || p.get("sliding_attention").is_some() => {
            (p.get("full_attention"), p.get("sliding_attention"))
        }
        Some(p) => (Some(p), None),
        None => (v.get("rope_scaling"), None),
    };
    let theta_of = |p: Option<&Value>, old_key: &str| {
        p.and_then(|p| p.get("rope_theta"))
            .or_else(|| v.get(old_key))
            .and_then(Value::as_f64)
            .map(|t| t as f32)
    };
    let alpha = global
        .filter(|g| kind_of(g) == "dynamic")
        .and_then(|g| g.get("alpha"));
    if let (Some(d), Some(alpha)) = (alpha_head_dim, alpha.and_then(Value::as_f64)) {
        let base = (global.and_then(|g| g.get("rope_theta")))
            .or_else(|| v.get("rope_theta"))
            .and_then(Value::as_f64)
            .unwrap_or(10000.0);
        return Ok(HfRope {
            theta: (base * alpha.powf(d as f64 / (d as f64 - 2.0))) as f32,
            local_theta: None,
            scaling: None,
        });
    }
    let local = local.filter(|l| !l.is_null());
    if let Some(kind) = local.map(kind_of).filter(|k| *k != "default") {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!(
                "rope_parameters of type \"{kind}\" on the sliding layers (kiln scales only the \
                 global layers' frequencies)"
            ),
        });
    }
    Ok(HfRope {
        theta: theta_of(global, "rope_theta").unwrap_or(10000.0),
        local_theta: theta_of(local, "rope_local_base_freq"),
        scaling: scaling(v, global.filter(|g| !g.is_null()), max_pos, file)?,
    })
}

/// `rope_type` (or its older name `type`); "default" when absent.
fn kind_of(p: &Value) -> &str {
    p.get("rope_type")
        .or_else(|| p.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default")
}

/// The scaling object `r` of config `v`, by its type.
fn scaling(
    v: &Value,
    r: Option<&Value>,
    max_pos: usize,
    file: &str,
) -> Result<Option<RopeScaling>, ModelError> {
    let Some(r) = r else {
        return Ok(None);
    };
    let num = |k: &str| r.get(k).and_then(Value::as_f64);
    let need = |k: &str| {
        num(k).ok_or_else(|| ModelError::config(file, format!("rope_scaling is missing \"{k}\"")))
    };
    // Phi-3 keeps its pre-training context outside the scaling object; transformers prefers
    // that entry, and takes the model's context when neither has one.
    let original = || {
        v.get("original_max_position_embeddings")
            .or_else(|| r.get("original_max_position_embeddings"))
            .and_then(Value::as_u64)
            .map(|o| o as usize)
    };
    Ok(Some(match kind_of(r) {
        "default" => return Ok(None),
        "linear" => match num("factor") {
            Some(f) if f > 0.0 => RopeScaling::Linear(f as f32),
            _ => {
                return Err(ModelError::config(
                    file,
                    "rope_scaling of type linear needs a positive \"factor\"",
                ));
            }
        },
        "llama3" => RopeScaling::Llama3(Llama3Rope {
            factor: need("factor")? as f32,
            low_freq_factor: need("low_freq_factor")? as f32,
            high_freq_factor: need("high_freq_factor")? as f32,
            original_max_position_embeddings: need("original_max_position_embeddings")? as usize,
        }),
        "longrope" | "su" => {
            let list = |k: &str| -> Result<Vec<f32>, ModelError> {
                r.get(k)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_f64)
                            .map(|x| x as f32)
                            .collect()
                    })
                    .ok_or_else(|| {
                        ModelError::config(file, format!("rope_scaling is missing \"{k}\""))
                    })
            };
            let original = original().ok_or_else(|| {
                ModelError::config(file, "LongRoPE without original_max_position_embeddings")
            })?;
            RopeScaling::LongRope(LongRope {
                short_factor: list("short_factor")?,
                long_factor: list("long_factor")?,
                original_max_position_embeddings: original,
                attention_factor: match num("attention_factor") {
                    Some(f) => f as f32,
                    None => LongRope::default_attention_factor(max_pos, original),
                },
            })
        }
        "yarn" => {
            let original = original().unwrap_or(max_pos);
            // DeepSeek-V3's configs leave the factor to the ratio of the two contexts.
            let factor = num("factor").unwrap_or(max_pos as f64 / original as f64);
            let attention_factor = match (
                num("attention_factor"),
                num("mscale"),
                num("mscale_all_dim"),
            ) {
                (Some(f), ..) => f,
                (None, Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                    Yarn::mscale(factor, m) / Yarn::mscale(factor, all)
                }
                _ => Yarn::mscale(factor, 1.0),
            };
            // transformers reads a 0 for either beta as its default.
            let beta = |k: &str, default: f64| num(k).filter(|&b| b != 0.0).unwrap_or(default);
            RopeScaling::Yarn(Yarn {
                factor: factor as f32,
                original_max_position_embeddings: original,
                beta_fast: beta("beta_fast", 32.0) as f32,
                beta_slow: beta("beta_slow", 1.0) as f32,
                attention_factor: attention_factor as f32,
                truncate: r.get("truncate").and_then(Value::as_bool).unwrap_or(true),
            })
        }
        other => {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!("rope_scaling type \"{other}\""),
            });
        }
    }))
}
