//! Qwen3: Llama's layer with an RMSNorm over each head of q and of k (one gain of
//! `head_dim` each) before the rotary embedding; no biases.

use super::Buf::Residual;
use super::llama::{attention, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), Some(n.qk_norm()), Residual).to_vec();
    ops.extend(mlp(
        &n,
        Some("post_attention_layernorm"),
        n.gate_up(),
        Residual,
    ));
    Layer { ops }
}
