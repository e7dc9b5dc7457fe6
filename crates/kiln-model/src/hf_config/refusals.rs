//! The options of a config.json that change a family's forward pass in ways kiln does not
//! run, refused by name: q, k and v clipped, LayerNorms of q and k where kiln runs none,
//! Falcon's, GPT-2's and BLOOM's layer options, MPT's attention options, biases on o_proj or
//! the MLP, and Hunyuan's cross-layer attention.

use serde_json::Value;

use super::family;
use crate::ModelError;
use crate::config::Architecture;

/// Refuses what config `v` of `architecture` (`model_type` by its config's name) asks that
/// kiln does not run; `qk_layer_norm` is whether the family's per-head LayerNorms of q and k
/// are on, which kiln runs.
pub(super) fn refuse_unrun(
    v: &Value,
    architecture: Architecture,
    model_type: &str,
    qk_layer_norm: bool,
    file: &str,
) -> Result<(), ModelError> {
    let flag = |key: &str| v.get(key).and_then(Value::as_bool) == Some(true);
    // OLMoE's clipping of q, k and v, which kiln does not run.
    if v.get("clip_qkv").is_some_and(|c| !c.is_null()) {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("clip_qkv (q, k and v clipped) on {model_type}"),
        });
    }
    // Phi's LayerNorms of q and k (`qk_layernorm`; Phi-1.5 and Phi-2 have none).
    if architecture == Architecture::Phi2
        && v.get("qk_layernorm").and_then(Value::as_bool) == Some(true)
    {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: "Phi with LayerNorms of q and k (qk_layernorm)".into(),
        });
    }
    if architecture == Architecture::Falcon {
        for (key, on, what) in [
            ("alibi", true, "ALiBi positions (alibi)"),
            (
                "apply_residual_connection_post_layernorm",
                true,
                "the residual taken after the LayerNorm",
            ),
            (
                "parallel_attn",
                false,
                "its sub-layers one after the other (parallel_attn false)",
            ),
        ] {
            if v.get(key).and_then(Value::as_bool) == Some(on) {
                return Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: format!("Falcon with {what}"),
                });
            }
        }
    }
    // GPT-2's options that change its forward pass: scores not scaled by 1/sqrt(head_dim),
    // or scaled by the layer's number too; cross-attention to an encoder. (StarCoder's
    // configs share the first.)
    if architecture.learned_positions() {
        for (key, on, what) in [
            ("scale_attn_weights", false, "attention scores not scaled"),
            (
                "scale_attn_by_inverse_layer_idx",
                true,
                "attention scores scaled by the layer's number",
            ),
            ("add_cross_attention", true, "cross-attention to an encoder"),
        ] {
            if v.get(key).and_then(Value::as_bool) == Some(on) {
                return Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: format!("{model_type} with {what} ({key} {on})"),
                });
            }
        }
    }
    if architecture == Architecture::Bloom && flag("apply_residual_connection_post_layernorm") {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: "BLOOM with the residual taken after the LayerNorm \
                     (apply_residual_connection_post_layernorm)"
                .into(),
        });
    }
    if architecture == Architecture::Mpt {
        family::mpt_attention(v, file)?;
    }
    // GPT-J's `rotary_dim` must be a whole number of dimensions; `null` (a table as wide as
    // the hidden size, which transformers' code runs only with one head) is refused with more.
    if architecture == Architecture::GptJ
        && let Some(r) = v.get("rotary_dim")
        && !r.is_u64()
        && !(r.is_null() && v.get("n_head").and_then(Value::as_u64) == Some(1))
    {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("GPT-J with rotary_dim {r}"),
        });
    }
    if architecture.layer_norm() && !qk_layer_norm && flag("use_qk_norm") {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("LayerNorms of q and k (use_qk_norm) on {model_type}"),
        });
    }
    // Biases on o_proj or the MLP (Llama's and Seed-OSS's flags): no kiln kernel adds them.
    for key in ["mlp_bias", "attention_out_bias"] {
        if v.get(key).and_then(Value::as_bool) == Some(true) {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!("{key} (biases kiln does not run) on {model_type}"),
            });
        }
    }
    // Hunyuan's cross-layer attention (layers sharing K/V), which kiln does not run.
    if matches!(
        architecture,
        Architecture::HunyuanDense | Architecture::HunyuanMoe
    ) && v.get("use_cla").and_then(Value::as_bool) == Some(true)
    {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: "Hunyuan with cross-layer attention (use_cla)".into(),
        });
    }
    Ok(())
}
