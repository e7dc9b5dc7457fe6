//! Qwen3: Llama's layer with an RMSNorm over each head of q and of k (one gain of
//! `head_dim` each) before the rotary embedding; no biases.

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
            bias: None,
            dst: Qkv,
        },
        Rotary {
            qk_norm: Some(n.qk_norm()),
        },
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
