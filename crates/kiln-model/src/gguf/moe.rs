//! A GGUF file's mixture of experts ([`crate::Moe`]) from llama.cpp's metadata keys
//! (`{arch}.expert_count`, `.expert_used_count`, ...), as llama.cpp's graphs run each family.

use super::meta::Meta;
use super::reader::MetaValue;
use crate::{Architecture, ModelError};

/// The mixture of experts of `architecture`'s files, as llama.cpp's graphs run them.
pub(super) fn moe(
    meta: &Meta,
    architecture: Architecture,
) -> Result<Option<crate::Moe>, ModelError> {
    let a = architecture.gguf_name();
    let key = |k: &str| format!("{a}.{k}");
    let req = |k: &str| meta.req_usize(&key(k));
    let routed = |intermediate: &str, normalize: bool| -> Result<crate::Moe, ModelError> {
        Ok(crate::Moe::softmax(
            req("expert_count")?,
            req("expert_used_count")?,
            req(intermediate)?,
            normalize,
        ))
    };
    Ok(Some(match architecture {
        // Qwen3 MoE's and Mixtral's graphs renormalize the chosen experts' weights; OLMoE's
        // weighs them by their share of all experts. Mixtral's and OLMoE's experts are the
        // MLP's size.
        Architecture::Qwen3Moe => routed("expert_feed_forward_length", true)?,
        // gpt-oss's graph weighs the chosen experts by the softmax over their logits: the
        // softmax over all, renormalized.
        Architecture::GptOss => routed("expert_feed_forward_length", true)?,
        Architecture::Mixtral => routed("feed_forward_length", true)?,
        Architecture::Olmoe => routed("feed_forward_length", false)?,
        // Qwen2 MoE's does not renormalize, and gates its shared expert.
        Architecture::Qwen2Moe => crate::Moe {
            shared: Some(crate::SharedExpert {
                intermediate_size: req("expert_shared_feed_forward_length")?,
                gated: true,
            }),
            ..routed("expert_feed_forward_length", false)?
        },
        // dots.llm1's are GLM-4.5's.
        Architecture::Glm4Moe | Architecture::Dots1 => {
            // llama.cpp's gating functions: 1 softmax, 2 sigmoid (GLM-4.5's).
            let gating = meta.usize(&key("expert_gating_func")).unwrap_or(2);
            if gating != 2 {
                return Err(ModelError::Unsupported {
                    file: meta.file.into(),
                    reason: format!("{a} with expert gating function {gating} (not sigmoid)"),
                });
            }
            let scale = meta.f64(&key("expert_weights_scale")).ok_or_else(|| {
                ModelError::config(
                    meta.file,
                    format!("missing \"{}\"", key("expert_weights_scale")),
                )
            })?;
            let experts = routed(
                "expert_feed_forward_length",
                (meta.get(&key("expert_weights_norm"))).and_then(MetaValue::as_bool) == Some(true),
            )?;
            let shared = meta.usize(&key("expert_shared_count")).unwrap_or(1);
            crate::Moe {
                scoring: crate::Scoring::Sigmoid,
                choice_bias: true,
                scale: scale as f32,
                shared: (shared > 0).then_some(crate::SharedExpert {
                    intermediate_size: shared * experts.intermediate_size,
                    gated: false,
                }),
                first_layer: req("leading_dense_block_count")?,
                ..experts
            }
        }
        // Granite's renormalizes; its experts are the MLP's size, a shared expert of its own.
        Architecture::GraniteMoe => crate::Moe {
            shared: (meta.usize(&key("expert_shared_feed_forward_length")))
                .filter(|&s| s > 0)
                .map(|intermediate_size| crate::SharedExpert {
                    intermediate_size,
                    gated: false,
                }),
            ..routed("feed_forward_length", true)?
        },
        // Hunyuan's renormalizes; its shared expert is `expert_shared_count` of the MLP's size.
        Architecture::HunyuanMoe => {
            let count = meta.usize(&key("expert_shared_count")).unwrap_or(1);
            let shared = meta.usize(&key("expert_shared_feed_forward_length"));
            crate::Moe {
                shared: (count > 0).then_some(crate::SharedExpert {
                    intermediate_size: count
                        * shared.map_or_else(|| req("feed_forward_length"), Ok)?,
                    gated: false,
                }),
                ..routed("expert_feed_forward_length", true)?
            }
        }
        // ERNIE 4.5's renormalizes, choosing with each expert's bias; its shared experts are
        // counted in experts' sizes.
        Architecture::Ernie45Moe => {
            let step = meta.usize(&key("interleave_moe_layer_step")).unwrap_or(1);
            if step != 1 {
                return Err(ModelError::Unsupported {
                    file: meta.file.into(),
                    reason: format!("{a} with experts on every {step} layers"),
                });
            }
            let experts = routed("expert_feed_forward_length", true)?;
            let shared = meta.usize(&key("expert_shared_count")).unwrap_or(0);
            crate::Moe {
                choice_bias: true,
                shared: (shared > 0).then_some(crate::SharedExpert {
                    intermediate_size: shared * experts.intermediate_size,
                    gated: false,
                }),
                first_layer: req("leading_dense_block_count")?,
                ..experts
            }
        }
        _ => return Ok(None),
    }))
}
