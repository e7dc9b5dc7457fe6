//! Qwen3: Llama's layout plus an RMSNorm over each head of q and of k (one gain of
//! `head_dim` each) before the rotary embedding; no biases.

use super::{LayerTensors, Tensor};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> LayerTensors {
    let d = cfg.head_dim;
    let t = |role: &str| Tensor::new(format!("model.layers.{i}.self_attn.{role}"), &[d]);
    LayerTensors {
        qk_norm: Some([t("q_norm.weight"), t("k_norm.weight")]),
        ..super::llama::layer(cfg, i)
    }
}
