//! gpt-oss (20B, 120B): Llama's pre-norm layer with biases on q, k, v and the attention's
//! output, a learned sink logit per query head in each softmax (a share of the attention
//! that weighs no value), and in place of the MLP a mixture of experts whose router and
//! experts have biases: the top experts by logit, weighted by the softmax over the chosen
//! ones (the softmax over all renormalized: [`crate::Moe::normalize`]), each a MLP with
//! gpt-oss's clamped SwiGLU ([`crate::Activation::ClampedSwiglu`]). Every second layer, from
//! the first, slides over the latest 128 positions ([`ModelConfig::layer_window`]).
//!
//! Read from GGUF files (llama.cpp's `gpt-oss`, whose converter stores gate and up apart);
//! Hugging Face folders store the experts transposed with gate and up interleaved (and the
//! released ones as MXFP4 blocks), which kiln does not read.

use super::Buf::{Attn, Qkv, Residual};
use super::Op::{Attention, Experts as RoutedExperts, NormedProject, Project, Rotary};
use super::{Experts, Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let moe = cfg.moe.expect("gpt-oss has a MoE config (validated)");
    let (h, ff) = (cfg.hidden_size, moe.intermediate_size);
    let biases = |kind: &str, width: usize| {
        (0..moe.experts)
            .map(|e| n.tensor(&format!("mlp.experts.{e}.{kind}_proj.bias"), &[width]))
            .collect::<Vec<_>>()
    };
    let experts = Experts {
        router_bias: Some(n.tensor("mlp.router.bias", &[moe.experts])),
        gate_up_bias: Some([biases("gate", ff), biases("up", ff)].concat()),
        down_bias: Some(biases("down", h)),
        ..n.experts("mlp.router.weight", |e, kind| {
            format!("mlp.experts.{e}.{kind}_proj.weight")
        })
    };
    let ops = vec![
        NormedProject {
            src: Residual,
            norm: Some(n.norm("input_layernorm")),
            weights: n.qkv(),
            bias: Some(n.qkv_bias()),
            dst: Qkv,
        },
        Rotary {
            qk_norm: None,
            norm_after: false,
        },
        Attention {
            sinks: Some(n.tensor("self_attn.sinks", &[cfg.num_heads])),
        },
        Project {
            src: Attn,
            weight: n.o(),
            bias: Some(n.tensor("self_attn.o_proj.bias", &[h])),
            dst: Residual,
        },
        RoutedExperts(Box::new(experts)),
    ];
    Layer { ops }
}
