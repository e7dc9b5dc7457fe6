//! GPT-NeoX as its Hugging Face folders hold it: the tensors under GPT-NeoX's own names
//! (`gpt_neox.layers.N.attention.query_key_value`, `embed_out`, ...), each head's q, k and v
//! rows together in `query_key_value`, and the config's RoPE keys as Pythia's folders name
//! them (`rotary_pct`, `rotary_emb_base`).

use serde_json::{Value, json};

use super::NamedTensor;
use crate::ModelConfig;
use crate::models::gpt_neox::hf_name;
use crate::weights::StoredRows;

/// `tensors` (kiln's names and row order) as a GPT-NeoX folder holds them.
pub(super) fn folder_tensors(mc: &ModelConfig, tensors: Vec<NamedTensor>) -> Vec<NamedTensor> {
    let by_head = StoredRows::QkvByHead {
        heads: mc.num_heads,
    };
    (tensors.into_iter())
        .map(|t| {
            let data = match t.name.contains(".self_attn.qkv_proj.") {
                true => by_head.reorder(&t.data, t.shape[0], true),
                false => t.data,
            };
            NamedTensor {
                name: hf_name(&t.name).expect("every GPT-NeoX tensor has a Hugging Face name"),
                shape: t.shape,
                data,
            }
        })
        .collect()
}

/// GPT-NeoX's own keys in `config`, in place of the common ones.
pub(super) fn config_keys(mc: &ModelConfig, config: &mut Value) {
    if let Some(o) = config.as_object_mut() {
        o.remove("rope_theta");
        o.remove("partial_rotary_factor");
    }
    config["rotary_emb_base"] = json!(mc.rope_theta);
    config["rotary_pct"] = json!(mc.rotary_dim() as f64 / mc.head_dim as f64);
    config["use_parallel_residual"] = json!(mc.parallel_residual);
    config["hidden_act"] = json!("gelu");
}
