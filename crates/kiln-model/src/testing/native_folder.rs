//! GPT-NeoX and Falcon as their Hugging Face folders hold them: the tensors under the family's
//! own names (`gpt_neox.layers.N.attention.query_key_value`, `transformer.h.N.ln_attn`, ...),
//! q, k and v rows by head or by group in `query_key_value`, and the config's keys as their
//! folders name them (Pythia's `rotary_pct` and `rotary_emb_base`; Falcon's `num_kv_heads`,
//! `new_decoder_architecture`, `ffn_hidden_size`, ...).

use serde_json::{Value, json};

use super::NamedTensor;
use crate::models::NativeFolder;
use crate::{Architecture, ModelConfig};

/// `tensors` (kiln's names and row order) as the folders of `mc`'s family hold them (GPT-NeoX's
/// and Falcon's: [`NativeFolder`]).
pub(super) fn folder_tensors(mc: &ModelConfig, tensors: Vec<NamedTensor>) -> Vec<NamedTensor> {
    let native = NativeFolder::of(mc).expect("a family with names of its own");
    (tensors.into_iter())
        .map(|t| {
            let data = match (native.qkv, t.name.contains(".self_attn.qkv_proj.")) {
                (Some(order), true) => order.reorder(&t.data, t.shape[0], true),
                _ => t.data,
            };
            NamedTensor {
                name: (native.names.hf_name(&t.name)).expect("every tensor has the folder's name"),
                shape: t.shape,
                data,
            }
        })
        .collect()
}

/// The family's own keys in `config`, in place of the common ones.
pub(super) fn config_keys(mc: &ModelConfig, config: &mut Value) {
    let common: &[&str] = match mc.architecture {
        Architecture::GptNeox => &["rope_theta", "partial_rotary_factor"],
        _ => &[
            "intermediate_size",
            "num_key_value_heads",
            "head_dim",
            "hidden_act",
            "layer_norm_eps",
            "attention_bias",
            "use_qk_norm",
            "sliding_window",
        ],
    };
    if let Some(o) = config.as_object_mut() {
        for key in common {
            o.remove(*key);
        }
    }
    if mc.architecture == Architecture::GptNeox {
        config["rotary_emb_base"] = json!(mc.rope_theta);
        config["rotary_pct"] = json!(mc.rotary_dim() as f64 / mc.head_dim as f64);
        config["use_parallel_residual"] = json!(mc.parallel_residual);
        config["hidden_act"] = json!("gelu");
        return;
    }
    // Falcon: multi-query as 7B (one KV head, the older layer), grouped as 40B otherwise.
    let grouped = mc.num_kv_heads > 1;
    config["new_decoder_architecture"] = json!(grouped);
    config["multi_query"] = json!(!grouped);
    config["num_kv_heads"] = json!(mc.num_kv_heads);
    config["num_ln_in_parallel_attn"] = json!(if mc.mlp_norm { 2 } else { 1 });
    config["parallel_attn"] = json!(true);
    config["alibi"] = json!(false);
    config["bias"] = json!(mc.attention_bias);
    config["ffn_hidden_size"] = json!(mc.intermediate_size);
    config["activation"] = json!("gelu");
    config["layer_norm_epsilon"] = json!(mc.rms_norm_eps);
}
