//! The mixtures of experts' keys in a tiny model's config.json, as each family's folders name
//! them: Mixtral's and GraniteMoe's `num_local_experts`, OLMoE's `num_experts`, GLM-4.5's and
//! dots.llm1's routing (`n_routed_experts`, `routed_scaling_factor`, `first_k_dense_replace`, ...),
//! Hunyuan's values a layer, ERNIE 4.5's `moe_*` keys, gpt-oss's layer kinds and SwiGLU limit,
//! and Qwen's (`num_experts`, `shared_expert_intermediate_size`, ...) for the others.

use serde_json::{Value, json};

use super::hf_config_json::layer_types;
use crate::{Architecture, ModelConfig};

/// The keys of `mc`'s experts, if it has any, added to `config`.
pub(super) fn moe_keys(mc: &ModelConfig, config: &mut Value) {
    if let (Architecture::Mixtral, Some(m)) = (mc.architecture, mc.moe) {
        config["num_local_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
    } else if let (Architecture::Olmoe, Some(m)) = (mc.architecture, mc.moe) {
        config["num_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["norm_topk_prob"] = json!(m.normalize);
    } else if let (Architecture::Glm4Moe | Architecture::Dots1, Some(m)) = (mc.architecture, mc.moe)
    {
        let shared = m
            .shared
            .map_or(0, |s| s.intermediate_size / m.intermediate_size);
        config["n_routed_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["moe_intermediate_size"] = json!(m.intermediate_size);
        config["norm_topk_prob"] = json!(m.normalize);
        config["routed_scaling_factor"] = json!(m.scale);
        config["n_shared_experts"] = json!(shared);
        config["first_k_dense_replace"] = json!(m.first_layer);
        config["n_group"] = json!(1);
        config["topk_group"] = json!(1);
        if mc.architecture == Architecture::Glm4Moe {
            config["use_qk_norm"] = json!(false);
            config["attention_bias"] = json!(true);
        } else {
            config["max_window_layers"] = json!(mc.num_layers);
        }
        // The released folders carry a multi-token-prediction layer; this one has none.
        config["num_nextn_predict_layers"] = json!(0);
    } else if let (Architecture::HunyuanMoe, Some(m)) = (mc.architecture, mc.moe) {
        // As Hunyuan-A13B's folder gives them: a value a layer.
        let layers = |x: usize| json!(vec![x; mc.num_layers]);
        config["num_experts"] = json!(m.experts);
        config["moe_topk"] = layers(m.experts_per_token);
        config["moe_intermediate_size"] = layers(m.intermediate_size);
        config["num_shared_expert"] = layers(1);
        config["use_cla"] = json!(false);
    } else if let (Architecture::GraniteMoe, Some(m)) = (mc.architecture, mc.moe) {
        config["num_local_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["shared_intermediate_size"] = json!(m.shared.map_or(0, |s| s.intermediate_size));
    } else if let (Architecture::Ernie45Moe, Some(m)) = (mc.architecture, mc.moe) {
        let shared = m
            .shared
            .map_or(0, |s| s.intermediate_size / m.intermediate_size);
        config["moe_num_experts"] = json!(m.experts);
        config["moe_k"] = json!(m.experts_per_token);
        config["moe_intermediate_size"] = json!(m.intermediate_size);
        config["moe_num_shared_experts"] = json!(shared);
        config["moe_layer_start_index"] = json!(m.first_layer);
        config["moe_layer_end_index"] = json!(-1);
        config["moe_layer_interval"] = json!(1);
    } else if let (Architecture::GptOss, Some(m)) = (mc.architecture, mc.moe) {
        config["num_local_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["layer_types"] = json!(layer_types(mc));
        config["swiglu_limit"] = json!(7.0);
    } else if let Some(m) = mc.moe {
        if let Some(s) = m.shared {
            config["shared_expert_intermediate_size"] = json!(s.intermediate_size);
        }
        config["num_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["moe_intermediate_size"] = json!(m.intermediate_size);
        config["norm_topk_prob"] = json!(m.normalize);
        config["decoder_sparse_step"] = json!(1);
        config["mlp_only_layers"] = json!([]);
    }
}
