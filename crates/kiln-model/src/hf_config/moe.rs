//! A Hugging Face config's mixture of experts ([`crate::Moe`]): each family's keys for its
//! experts, routing, shared experts and dense layers, and the variants kiln refuses by name.

use serde_json::Value;

use crate::ModelError;
use crate::config::Architecture;

/// The mixture of experts of `architecture`'s config `v` (of `layers` layers), if it has one.
pub(super) fn moe(
    v: &Value,
    architecture: Architecture,
    layers: usize,
    file: &str,
) -> Result<Option<crate::Moe>, ModelError> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x as usize);
    let req = |k: &str| {
        n(k).ok_or_else(|| ModelError::config(file, format!("missing or non-integer \"{k}\"")))
    };
    Ok(Some(match architecture {
        Architecture::Qwen3Moe => qwen3_moe(v, layers, file)?,
        // Qwen3 MoE's routing (Qwen2 MoE came first) and a gated shared expert.
        Architecture::Qwen2Moe => crate::Moe {
            shared: Some(crate::SharedExpert {
                intermediate_size: req("shared_expert_intermediate_size")?,
                gated: true,
            }),
            ..qwen3_moe(v, layers, file)?
        },
        Architecture::Glm4Moe => glm4_moe(v, file, (true, 1, 1))?,
        // dots.llm1's defaults: not renormalized, no dense layer, no shared expert.
        Architecture::Dots1 => glm4_moe(v, file, (false, 0, 0))?,
        Architecture::HunyuanMoe => hunyuan_moe(v, file)?,
        Architecture::Ernie45Moe => ernie4_5_moe(v, layers, file)?,
        // Granite's experts are its MLP's size; GraniteMoeShared adds a shared expert.
        Architecture::GraniteMoe => crate::Moe {
            shared: n("shared_intermediate_size")
                .filter(|&s| s > 0)
                .map(|intermediate_size| crate::SharedExpert {
                    intermediate_size,
                    gated: false,
                }),
            ..crate::Moe::softmax(
                req("num_local_experts")?,
                req("num_experts_per_tok")?,
                req("intermediate_size")?,
                true,
            )
        },
        // Mixtral's experts are its MLP's size, their weights the softmax of the chosen
        // logits.
        Architecture::Mixtral => crate::Moe::softmax(
            req("num_local_experts")?,
            req("num_experts_per_tok")?,
            req("intermediate_size")?,
            true,
        ),
        // OLMoE's experts are its MLP's size too.
        Architecture::Olmoe => crate::Moe::softmax(
            n("num_local_experts").map_or_else(|| req("num_experts"), Ok)?,
            req("num_experts_per_tok")?,
            req("intermediate_size")?,
            v.get("norm_topk_prob")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        _ => return Ok(None),
    }))
}

/// Qwen3 MoE's experts (and Qwen2 MoE's routed ones): on every layer (`decoder_sparse_step` 1 and no `mlp_only_layers`, as
/// the released models have them; the others are refused by name).
fn qwen3_moe(v: &Value, layers: usize, file: &str) -> Result<crate::Moe, ModelError> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x as usize);
    let step = n("decoder_sparse_step").unwrap_or(1);
    let dense = (v.get("mlp_only_layers").and_then(Value::as_array)).is_some_and(|a| !a.is_empty());
    if step != 1 || dense {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!(
                "a Qwen mixture of experts with dense MLP layers (decoder_sparse_step {step}, \
                 mlp_only_layers) among its {layers}"
            ),
        });
    }
    let need = |k: &str| n(k).ok_or_else(|| ModelError::config(file, format!("missing \"{k}\"")));
    Ok(crate::Moe::softmax(
        // Transformers 5 writes the released configs' `num_experts` under another name.
        n("num_local_experts").map_or_else(|| need("num_experts"), Ok)?,
        need("num_experts_per_tok")?,
        need("moe_intermediate_size")?,
        v.get("norm_topk_prob")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    ))
}

/// GLM-4.5's experts (and dots.llm1's): chosen by sigmoid scores plus each expert's bias,
/// weighted by the scores (renormalized with `norm_topk_prob`) times
/// `routed_scaling_factor`; `n_shared_experts` experts' worth of shared expert; the first
/// `first_k_dense_replace` layers dense; `defaults` the architecture's for the first three
/// where its config leaves them out. Groups of experts that limit the choice (`topk_group`
/// of `n_group`) and GLM's per-head q/k norms (`use_qk_norm`) are refused.
fn glm4_moe(
    v: &Value,
    file: &str,
    defaults: (bool, usize, usize),
) -> Result<crate::Moe, ModelError> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x as usize);
    let need = |k: &str| n(k).ok_or_else(|| ModelError::config(file, format!("missing \"{k}\"")));
    let (groups, chosen_groups) = (n("n_group").unwrap_or(1), n("topk_group").unwrap_or(1));
    let qk_norm = v.get("use_qk_norm").and_then(Value::as_bool) == Some(true);
    if chosen_groups < groups || qk_norm {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!(
                "experts chosen within {chosen_groups} of {groups} groups, or GLM-4.5's per-head \
                 q/k norms (use_qk_norm {qk_norm})"
            ),
        });
    }
    let intermediate_size = need("moe_intermediate_size")?;
    let (normalize, first_dense, shared) = defaults;
    let shared = n("n_shared_experts").unwrap_or(shared);
    Ok(crate::Moe {
        scoring: crate::Scoring::Sigmoid,
        choice_bias: true,
        scale: v
            .get("routed_scaling_factor")
            .and_then(Value::as_f64)
            .unwrap_or(1.0) as f32,
        shared: (shared > 0).then_some(crate::SharedExpert {
            intermediate_size: shared * intermediate_size,
            gated: false,
        }),
        first_layer: n("first_k_dense_replace").unwrap_or(first_dense),
        ..crate::Moe::softmax(
            n("n_routed_experts").map_or_else(|| need("num_local_experts"), Ok)?,
            need("num_experts_per_tok")?,
            intermediate_size,
            v.get("norm_topk_prob")
                .and_then(Value::as_bool)
                .unwrap_or(normalize),
        )
    })
}

/// ERNIE 4.5's experts: chosen by softmax scores plus each expert's bias, weighted by the
/// scores renormalized; `moe_num_shared_experts` experts' worth of shared expert; dense layers
/// before `moe_layer_start_index`. Dense layers among the experts' (an interval other than 1,
/// or an end before the last layer) are refused.
fn ernie4_5_moe(v: &Value, layers: usize, file: &str) -> Result<crate::Moe, ModelError> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x as usize);
    let need = |k: &str| n(k).ok_or_else(|| ModelError::config(file, format!("missing \"{k}\"")));
    let interval = n("moe_layer_interval").unwrap_or(1);
    let end = v
        .get("moe_layer_end_index")
        .and_then(Value::as_i64)
        .unwrap_or(-1);
    if interval != 1 || (end != -1 && end != layers as i64 - 1) {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!(
                "ERNIE 4.5 with dense layers among its experts' (moe_layer_interval {interval}, \
                 moe_layer_end_index {end} of {layers} layers)"
            ),
        });
    }
    let intermediate_size = need("moe_intermediate_size")?;
    let shared = n("moe_num_shared_experts").unwrap_or(0);
    Ok(crate::Moe {
        choice_bias: true,
        shared: (shared > 0).then_some(crate::SharedExpert {
            intermediate_size: shared * intermediate_size,
            gated: false,
        }),
        first_layer: n("moe_layer_start_index").unwrap_or(1),
        ..crate::Moe::softmax(
            n("moe_num_experts").map_or_else(|| need("num_experts"), Ok)?,
            n("moe_k").map_or_else(|| need("num_experts_per_tok"), Ok)?,
            intermediate_size,
            true,
        )
    })
}

/// Hunyuan's experts: their softmax renormalized over the chosen; a shared expert of the
/// MLP's size times `num_shared_expert`. Its configs give the experts' size, number a token
/// and shared experts a layer as lists; layers that differ are refused.
fn hunyuan_moe(v: &Value, file: &str) -> Result<crate::Moe, ModelError> {
    let same = |key: &str| -> Result<Option<usize>, ModelError> {
        let all: Vec<u64> = match v.get(key) {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_u64).collect(),
            Some(x) => x.as_u64().into_iter().collect(),
            None => return Ok(None),
        };
        match all.first() {
            Some(&first) if all.iter().all(|&x| x == first) => Ok(Some(first as usize)),
            _ => Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!("Hunyuan with layers of different \"{key}\" ({all:?})"),
            }),
        }
    };
    let need = |key: &str| {
        same(key)?.ok_or_else(|| ModelError::config(file, format!("missing \"{key}\"")))
    };
    let intermediate = need("intermediate_size")?;
    let shared = same("num_shared_expert")?.unwrap_or(1);
    Ok(crate::Moe {
        shared: (shared > 0).then_some(crate::SharedExpert {
            intermediate_size: shared * intermediate,
            gated: false,
        }),
        ..crate::Moe::softmax(
            need("num_experts")?,
            need("moe_topk")?,
            same("moe_intermediate_size")?.unwrap_or(intermediate),
            true,
        )
    })
}
