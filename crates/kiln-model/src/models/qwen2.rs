//! Qwen2 and Qwen2.5: Llama's layer with biases on the q, k and v projections.

use super::Buf::{Attn, Qkv, Residual};
use super::Op::{Attention, NormedProject, Project, Rotary};
use super::{Layer, Names, llama};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![
        NormedProject {
            norm: n.norm("input_layernorm"),
            weights: n.qkv(),
            bias: Some(n.qkv_bias()),
            dst: Qkv,
        },
        Rotary { qk_norm: None },
        Attention,
        Project {
            src: Attn,
            weight: n.o(),
            dst: Residual,
        },
    ];
    ops.extend(llama::mlp(
        &n,
        "post_attention_layernorm",
        n.gate_up(),
        Residual,
    ));
    Layer { ops }
}
