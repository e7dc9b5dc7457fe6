//! Phi-3 and Phi-3.5: Llama's layer with q, k and v fused into one tensor, and gate and up
//! into another; its LongRoPE frequency factors are in [`crate::ModelConfig`].

use super::Buf::{Attn, Qkv, Residual};
use super::Op::{Attention, NormedProject, Project, Rotary};
use super::{Layer, Names, llama};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let (h, d, ff) = (cfg.hidden_size, cfg.head_dim, cfg.intermediate_size);
    let qkv = (cfg.num_heads + 2 * cfg.num_kv_heads) * d;
    let mut ops = vec![
        NormedProject {
            norm: n.norm("input_layernorm"),
            weights: vec![n.tensor("self_attn.qkv_proj.weight", &[qkv, h])],
            bias: None,
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
    let gate_up = vec![n.tensor("mlp.gate_up_proj.weight", &[2 * ff, h])];
    ops.extend(llama::mlp(
        &n,
        "post_attention_layernorm",
        gate_up,
        Residual,
    ));
    Layer { ops }
}
