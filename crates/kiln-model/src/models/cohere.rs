//! Cohere's Command-R (Command-R, Aya 23, Aya Expanse): one LayerNorm (mean subtracted, no
//! bias) of the residual stream, which attention and the gated MLP both read, side by side;
//! each adds its output to the stream. Its rotary pairs are side by side in q and k, as
//! GLM-4's are; the loaders put them half a head apart ([`super::interleaved_rows`]). The
//! logits are multiplied by the config's `logit_scale` ([`ModelConfig::granite`]'s divisor).
//! Command R7B and Command A (`cohere2`) are this layer with three sliding layers to a global
//! one that applies no RoPE ([`ModelConfig::no_rope_layers`]).

use super::Buf::{Act, Attn, GateUp, Normed, Qkv, Residual};
use super::Op::{Attention, GatedActivation, LayerNorm, NormedProject, Project, Rotary};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let ops = vec![
        LayerNorm {
            norm: n.norm("input_layernorm"),
            bias: None,
        },
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
        // Into the stream; the MLP reads the norm taken before attention, not this sum.
        Project {
            src: Attn,
            weight: n.o(),
            bias: None,
            dst: Residual,
        },
        NormedProject {
            src: Normed,
            norm: None,
            weights: n.gate_up(),
            bias: None,
            dst: GateUp,
        },
        GatedActivation,
        Project {
            src: Act,
            weight: n.down(),
            bias: None,
            dst: Residual,
        },
    ];
    Layer { ops }
}
