//! Phi-3 and Phi-3.5: Llama's layout with q, k and v fused into one tensor, and gate and up
//! into another; its LongRoPE frequency factors are in [`crate::ModelConfig`].

use super::{Fused, LayerTensors, Tensor};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> LayerTensors {
    let (h, d, ff) = (cfg.hidden_size, cfg.head_dim, cfg.intermediate_size);
    let qkv = (cfg.num_heads + 2 * cfg.num_kv_heads) * d;
    let t = |role: &str, shape: &[usize]| Tensor::new(format!("model.layers.{i}.{role}"), shape);
    LayerTensors {
        qkv: Fused(t("self_attn.qkv_proj.weight", &[qkv, h])),
        gate_up: Fused(t("mlp.gate_up_proj.weight", &[2 * ff, h])),
        ..super::llama::layer(cfg, i)
    }
}
