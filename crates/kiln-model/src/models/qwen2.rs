//! Qwen2 and Qwen2.5: Llama's layer with biases on the q, k and v projections.

use super::Buf::Residual;
use super::llama::{attention, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), Some(n.qkv_bias()), None, Residual).to_vec();
    ops.extend(mlp(&n, "post_attention_layernorm", n.gate_up(), Residual));
    Layer { ops }
}
