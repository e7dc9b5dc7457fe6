//! Granite's four multipliers ([`GraniteScales`]) from a config.json: Granite's own keys,
//! MiniCPM's, which give the same forward pass under other names, or Cohere's scale on the
//! logits.

use serde_json::Value;

use crate::ModelError;
use crate::config::{Architecture, GraniteScales};

/// The multipliers of `architecture`'s config `v`, if it has them.
pub(super) fn multipliers(
    v: &Value,
    architecture: Architecture,
    head_dim: usize,
    layers: usize,
    file: &str,
) -> Result<Option<GraniteScales>, ModelError> {
    Ok(match architecture {
        Architecture::Granite | Architecture::GraniteMoe => Some(granite(v)),
        Architecture::MiniCpm => Some(minicpm(v, head_dim, layers, file)?),
        Architecture::Cohere | Architecture::Cohere2 => Some(cohere(v, head_dim, file)?),
        _ => None,
    })
}

/// Granite's, 1 where its config leaves one out (as transformers' defaults; its attention
/// multiplier replaces 1/sqrt(head_dim) outright).
fn granite(v: &Value) -> GraniteScales {
    let m = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(1.0) as f32;
    GraniteScales {
        embedding: m("embedding_multiplier"),
        attention: m("attention_multiplier"),
        residual: m("residual_multiplier"),
        logits: m("logits_scaling"),
    }
}

/// MiniCPM's multipliers as Granite's (`models::minicpm`): `scale_emb` on the
/// embeddings, `scale_depth / sqrt(num_layers)` on each sub-layer's output, the logits divided
/// by `hidden_size / dim_model_base`, the attention scale `1/sqrt(head_dim)`; a key the config
/// leaves out counts as 1. MiniCPM's mixture of experts
/// (MiniCPM-MoE-8x2B, `num_experts`) is refused by name.
fn minicpm(
    v: &Value,
    head_dim: usize,
    layers: usize,
    file: &str,
) -> Result<GraniteScales, ModelError> {
    if v.get("num_experts")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 0)
    {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: "MiniCPM's mixture of experts (num_experts)".into(),
        });
    }
    let f = |k: &str| -> Result<f64, ModelError> {
        match v.get(k).filter(|x| !x.is_null()) {
            None => Ok(1.0),
            Some(x) => x
                .as_f64()
                .ok_or_else(|| ModelError::config(file, format!("\"{k}\" is not a number"))),
        }
    };
    let (emb, depth, base) = (f("scale_emb")?, f("scale_depth")?, f("dim_model_base")?);
    if [emb, depth, base]
        .iter()
        .any(|m| !(m.is_finite() && *m > 0.0))
    {
        return Err(ModelError::config(
            file,
            format!(
                "MiniCPM's scale_emb {emb}, scale_depth {depth} and dim_model_base {base} must \
                 be positive numbers"
            ),
        ));
    }
    let hidden = v.get("hidden_size").and_then(Value::as_f64).unwrap_or(1.0);
    Ok(GraniteScales {
        embedding: emb as f32,
        attention: GraniteScales::plain_attention(head_dim),
        residual: (depth / (layers as f64).sqrt()) as f32,
        logits: (hidden / base) as f32,
    })
}

/// Cohere's `logit_scale` (0.0625 where the config leaves it out, transformers' default): the
/// logits are multiplied by it, so divided by its inverse; the other three are 1 and the
/// attention scale the usual.
fn cohere(v: &Value, head_dim: usize, file: &str) -> Result<GraniteScales, ModelError> {
    let scale = match v.get("logit_scale").filter(|x| !x.is_null()) {
        None => 0.0625,
        Some(x) => x
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| {
                ModelError::config(file, format!("logit_scale {x} must be a positive number"))
            })?,
    };
    Ok(GraniteScales {
        embedding: 1.0,
        attention: GraniteScales::plain_attention(head_dim),
        residual: 1.0,
        logits: (1.0 / scale) as f32,
    })
}
