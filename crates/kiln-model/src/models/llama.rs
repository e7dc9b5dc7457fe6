//! Llama (Llama 2 and 3, SmolLM2, TinyLlama, Mistral): RMSNorm, grouped-query attention with
//! rotary embeddings, a SiLU-gated MLP; no biases. The layout the other families extend.

use super::{LayerTensors, Parts, Tensor};
use crate::ModelConfig;

/// Layer `i`'s tensors.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> LayerTensors {
    let (h, d, ff) = (cfg.hidden_size, cfg.head_dim, cfg.intermediate_size);
    let (q, kv) = (cfg.num_heads * d, cfg.num_kv_heads * d);
    let t = |role: &str, shape: &[usize]| Tensor::new(format!("model.layers.{i}.{role}"), shape);
    LayerTensors {
        attn_norm: t("input_layernorm.weight", &[h]),
        qkv: Parts([
            t("self_attn.q_proj.weight", &[q, h]),
            t("self_attn.k_proj.weight", &[kv, h]),
            t("self_attn.v_proj.weight", &[kv, h]),
        ]),
        o: t("self_attn.o_proj.weight", &[h, q]),
        qkv_bias: None,
        qk_norm: None,
        post_norms: None,
        mlp_norm: t("post_attention_layernorm.weight", &[h]),
        gate_up: Parts([
            t("mlp.gate_proj.weight", &[ff, h]),
            t("mlp.up_proj.weight", &[ff, h]),
        ]),
        down: t("mlp.down_proj.weight", &[h, ff]),
    }
}
