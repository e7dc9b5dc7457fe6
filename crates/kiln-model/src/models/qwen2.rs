//! Qwen2 and Qwen2.5: Llama's layout plus biases on the q, k and v projections.

use super::{LayerTensors, Tensor};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> LayerTensors {
    let d = cfg.head_dim;
    let (q, kv) = (cfg.num_heads * d, cfg.num_kv_heads * d);
    let t = |role: &str, n: usize| Tensor::new(format!("model.layers.{i}.self_attn.{role}"), &[n]);
    LayerTensors {
        qkv_bias: Some([
            t("q_proj.bias", q),
            t("k_proj.bias", kv),
            t("v_proj.bias", kv),
        ]),
        ..super::llama::layer(cfg, i)
    }
}
