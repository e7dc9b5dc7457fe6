//! StableLM (StableLM 2 1.6B, StableLM 3B 4E1T, Zephyr 3B, StableCode 3B): Llama's layer with
//! a LayerNorm, biases included, before attention and before the MLP (each into a buffer of
//! its own that the sub-layer's product reads), q/k/v biases where the config says
//! (`use_qkv_bias`), and a rotary embedding on the first quarter of each head unless the
//! config gives another `partial_rotary_factor`. The models whose attention and MLP run side
//! by side (`use_parallel_residual`) or whose q and k have LayerNorms of their own (StableLM 2
//! 12B) are refused.

use super::Buf::{Act, Attn, GateUp, Normed, Qkv, Residual};
use super::Op::{Attention, GatedActivation, LayerNorm, NormedProject, Project, Rotary};
use super::{Layer, Names, Op};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n).to_vec();
    ops.extend([
        layer_norm(&n, "post_attention_layernorm"),
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
    ]);
    Layer { ops }
}

/// The LayerNorm `role` (its gain and bias) of the residual stream into [`Normed`].
pub(super) fn layer_norm(n: &Names, role: &str) -> Op {
    LayerNorm {
        norm: n.norm(role),
        bias: Some(n.tensor(&format!("{role}.bias"), &[n.cfg.hidden_size])),
    }
}

/// Attention on the residual stream through the LayerNorm `input_layernorm`, its output
/// added to the stream.
pub(super) fn attention(n: &Names) -> [Op; 5] {
    [
        layer_norm(n, "input_layernorm"),
        NormedProject {
            src: Normed,
            norm: None,
            weights: n.qkv(),
            bias: n.cfg.attention_bias.then(|| n.qkv_bias()),
            dst: Qkv,
        },
        Rotary {
            qk_norm: None,
            norm_after: false,
        },
        Attention { sinks: None },
        Project {
            src: Attn,
            weight: n.o(),
            bias: None,
            dst: Residual,
        },
    ]
}
