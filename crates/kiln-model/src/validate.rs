//! Checks that a model's weights match its config: every tensor the forward pass needs is
//! present, has the expected HF shape and a supported type.

use crate::{ModelConfig, ModelError, Weights};

/// (name, expected shape) of every tensor the forward pass reads.
pub fn expected_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (h, hd) = (cfg.hidden_size, cfg.head_dim);
    let (q, kv, ff) = (
        cfg.num_heads * hd,
        cfg.num_kv_heads * hd,
        cfg.intermediate_size,
    );
    let mut v = vec![(
        "model.embed_tokens.weight".to_string(),
        vec![cfg.vocab_size, h],
    )];
    for i in 0..cfg.num_layers {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        v.push((p("input_layernorm.weight"), vec![h]));
        v.push((p("self_attn.q_proj.weight"), vec![q, h]));
        v.push((p("self_attn.k_proj.weight"), vec![kv, h]));
        v.push((p("self_attn.v_proj.weight"), vec![kv, h]));
        v.push((p("self_attn.o_proj.weight"), vec![h, q]));
        if cfg.attention_bias {
            v.push((p("self_attn.q_proj.bias"), vec![q]));
            v.push((p("self_attn.k_proj.bias"), vec![kv]));
            v.push((p("self_attn.v_proj.bias"), vec![kv]));
        }
        if cfg.qk_norm() {
            v.push((p("self_attn.q_norm.weight"), vec![hd]));
            v.push((p("self_attn.k_norm.weight"), vec![hd]));
        }
        v.push((p("post_attention_layernorm.weight"), vec![h]));
        v.push((p("mlp.gate_proj.weight"), vec![ff, h]));
        v.push((p("mlp.up_proj.weight"), vec![ff, h]));
        v.push((p("mlp.down_proj.weight"), vec![h, ff]));
    }
    v.push(("model.norm.weight".to_string(), vec![h]));
    if !cfg.tie_word_embeddings {
        v.push(("lm_head.weight".to_string(), vec![cfg.vocab_size, h]));
    }
    v
}

pub(crate) fn check_weights(
    cfg: &ModelConfig,
    w: &Weights,
    source: &str,
) -> Result<(), ModelError> {
    for (name, shape) in expected_tensors(cfg) {
        let actual = w.shape(&name)?;
        if actual != shape {
            return Err(ModelError::corrupt(
                source,
                format!("tensor \"{name}\" has shape {actual:?}, the config implies {shape:?}"),
            ));
        }
        w.dtype(&name)?;
    }
    Ok(())
}
