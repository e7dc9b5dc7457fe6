//! GPT-NeoX, Falcon, GPT-2, StarCoder, BLOOM, MPT, GPT-J, InternLM2 and EXAONE 3 as their
//! Hugging Face folders hold them: the tensors under the family's own names
//! (`gpt_neox.layers.N.attention.query_key_value`, `transformer.h.N.ln_attn`,
//! `transformer.wpe`, `model.layers.N.attention.wqkv`, ...), q, k and v rows by head or by
//! group in `query_key_value` and `wqkv`, GPT-2's products transposed (`Conv1D`), and the
//! config's keys as their folders name them (Pythia's `rotary_pct` and `rotary_emb_base`;
//! Falcon's `num_kv_heads`, `new_decoder_architecture`, `ffn_hidden_size`, ...; GPT-2's
//! `n_embd`, `n_positions`, ...; InternLM2's `bias`).

use serde_json::{Value, json};

use super::NamedTensor;
use crate::models::{NativeFolder, gpt2};
use crate::{Architecture, ModelConfig};

/// `tensors` (kiln's names and row order) as the folders of `mc`'s family hold them
/// ([`NativeFolder`]).
pub(super) fn folder_tensors(mc: &ModelConfig, tensors: Vec<NamedTensor>) -> Vec<NamedTensor> {
    let native = NativeFolder::of(mc).expect("a family with names of its own");
    let conv1d = |name: &str| {
        mc.architecture == Architecture::Gpt2 && gpt2::CONV1D.iter().any(|p| name.ends_with(p))
    };
    (tensors.into_iter())
        .map(|t| {
            let (mut shape, mut data) = (t.shape, t.data);
            if let (Some(order), true) = (native.qkv, t.name.contains(".self_attn.qkv_proj.")) {
                data = order.reorder(&data, shape[0], true);
            }
            if conv1d(&t.name) {
                let (rows, cols) = (shape[0], shape[1]);
                data = (0..cols * rows)
                    .map(|i| data[(i % rows) * cols + i / rows])
                    .collect();
                shape = vec![cols, rows];
            }
            NamedTensor {
                name: (native.names.hf_name(&t.name))
                    .unwrap_or_else(|| panic!("{} has no folder name", t.name)),
                shape,
                data,
            }
        })
        .collect()
}

/// The family's own keys in `config`, in place of the common ones.
pub(super) fn config_keys(mc: &ModelConfig, config: &mut Value) {
    let common: &[&str] = match mc.architecture {
        Architecture::GptNeox => &["rope_theta", "partial_rotary_factor"],
        Architecture::InternLm2 => &["head_dim", "attention_bias", "sliding_window"],
        Architecture::Exaone => &[
            "num_hidden_layers",
            "rms_norm_eps",
            "hidden_act",
            "attention_bias",
            "sliding_window",
        ],
        Architecture::Gpt2
        | Architecture::Starcoder
        | Architecture::Bloom
        | Architecture::Mpt
        | Architecture::GptJ => &[
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "max_position_embeddings",
            "rms_norm_eps",
            "rope_theta",
            "hidden_act",
            "attention_bias",
            "sliding_window",
            "rope_scaling",
            "layer_norm_eps",
            "use_qk_norm",
        ],
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
    if mc.architecture == Architecture::Exaone {
        config["num_layers"] = json!(mc.num_layers);
        config["layer_norm_epsilon"] = json!(mc.rms_norm_eps);
        config["activation_function"] = json!("silu");
        return;
    }
    if mc.architecture == Architecture::InternLm2 {
        config["bias"] = json!(false);
        return;
    }
    if mc.architecture == Architecture::Mpt {
        config["d_model"] = json!(mc.hidden_size);
        config["n_layers"] = json!(mc.num_layers);
        config["n_heads"] = json!(mc.num_heads);
        config["max_seq_len"] = json!(mc.max_position_embeddings);
        config["expansion_ratio"] = json!(mc.intermediate_size / mc.hidden_size);
        config["layer_norm_epsilon"] = json!(mc.rms_norm_eps);
        config["no_bias"] = json!(true);
        config["attn_config"] = json!({
            "alibi": true, "alibi_bias_max": mc.alibi.map(|m| m as i64), "attn_type": "multihead_attention",
            "clip_qkv": null, "qk_ln": false, "softmax_scale": null, "prefix_lm": false,
        });
        return;
    }
    if mc.architecture == Architecture::GptJ {
        config["n_embd"] = json!(mc.hidden_size);
        config["n_inner"] = json!(mc.intermediate_size);
        config["n_layer"] = json!(mc.num_layers);
        config["n_head"] = json!(mc.num_heads);
        config["n_positions"] = json!(mc.max_position_embeddings);
        config["rotary_dim"] = json!(mc.rotary_dim());
        config["layer_norm_epsilon"] = json!(mc.rms_norm_eps);
        config["activation_function"] = json!("gelu_new");
        (config.as_object_mut()).map(|o| o.remove("partial_rotary_factor"));
        return;
    }
    if mc.architecture == Architecture::Bloom {
        config["n_embed"] = json!(mc.hidden_size);
        config["n_layer"] = json!(mc.num_layers);
        config["n_head"] = json!(mc.num_heads);
        config["layer_norm_epsilon"] = json!(mc.rms_norm_eps);
        config["apply_residual_connection_post_layernorm"] = json!(false);
        return;
    }
    if mc.architecture.learned_positions() {
        config["n_embd"] = json!(mc.hidden_size);
        config["n_inner"] = json!(mc.intermediate_size);
        config["n_layer"] = json!(mc.num_layers);
        config["n_head"] = json!(mc.num_heads);
        config["n_positions"] = json!(mc.max_position_embeddings);
        config["layer_norm_epsilon"] = json!(mc.rms_norm_eps);
        config["scale_attn_weights"] = json!(true);
        if mc.architecture == Architecture::Starcoder {
            config["multi_query"] = json!(mc.num_kv_heads == 1);
            config["activation_function"] = json!("gelu_pytorch_tanh");
        } else {
            config["activation_function"] = json!("gelu_new");
            config["scale_attn_by_inverse_layer_idx"] = json!(false);
        }
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
