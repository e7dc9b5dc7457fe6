//! StarCoder2 (3B, 7B, 15B): StableLM's LayerNorms with biases before attention and the MLP,
//! biases on q, k, v, the attention's output and both of the MLP's products where the config
//! says (`use_bias`, the released models' choice), and a MLP without a gate,
//! `c_proj(gelu(c_fc x))` (GELU with the tanh approximation). Its window, where the config has
//! one, is on every layer, as Mistral's.

use super::Buf::{Act, Normed, Qkv, Residual};
use super::Op::{Activation, Attention, NormedProject, Project, Rotary};
use super::stablelm::layer_norm;
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let (h, ff) = (cfg.hidden_size, cfg.intermediate_size);
    let bias = |role: &str, len: usize| {
        (cfg.attention_bias).then(|| n.tensor(&format!("{role}.bias"), &[len]))
    };
    let ops = vec![
        layer_norm(&n, "input_layernorm"),
        NormedProject {
            src: Normed,
            norm: None,
            weights: n.qkv(),
            bias: cfg.attention_bias.then(|| n.qkv_bias()),
            dst: Qkv,
        },
        Rotary {
            qk_norm: None,
            norm_after: false,
        },
        Attention { sinks: None },
        Project {
            src: super::Buf::Attn,
            weight: n.o(),
            bias: bias("self_attn.o_proj", h),
            dst: Residual,
        },
        layer_norm(&n, "post_attention_layernorm"),
        NormedProject {
            src: Normed,
            norm: None,
            weights: vec![n.tensor("mlp.c_fc.weight", &[ff, h])],
            bias: bias("mlp.c_fc", ff).map(|b| vec![b]),
            dst: Act,
        },
        Activation,
        Project {
            src: Act,
            weight: n.tensor("mlp.c_proj.weight", &[h, ff]),
            bias: bias("mlp.c_proj", h),
            dst: Residual,
        },
    ];
    Layer { ops }
}
