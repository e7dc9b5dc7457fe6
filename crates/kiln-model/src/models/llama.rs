//! Llama (Llama 2 and 3, SmolLM2, TinyLlama, Mistral): pre-norm attention and a SiLU-gated
//! MLP, each added to the residual stream; grouped-query attention with rotary embeddings;
//! q/k/v biases when the config's `attention_bias` says so. The layout the other families
//! extend, through [`attention`] and [`mlp`].

use super::Buf::{Act, Attn, GateUp, Qkv, Residual};
use super::Op::{Attention, GatedActivation, NormedProject, Project, Rotary};
use super::{Buf, Layer, Names, Op, Tensor};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    ops.extend(mlp(
        &n,
        Some("post_attention_layernorm"),
        n.gate_up(),
        Residual,
    ));
    Layer { ops }
}

/// Attention on the normalized residual stream: the q, k and v projection (`qkv`, with its
/// biases when the config has `attention_bias`), the rotary step (per-head norms first with
/// `qk_norm`), attention, and the output projection into `dst` (added, into the residual
/// stream).
pub(super) fn attention(
    n: &Names,
    qkv: Vec<Tensor>,
    qk_norm: Option<[Tensor; 2]>,
    dst: Buf,
) -> [Op; 4] {
    [
        NormedProject {
            src: Residual,
            norm: Some(n.norm("input_layernorm")),
            weights: qkv,
            bias: n.cfg.attention_bias.then(|| n.qkv_bias()),
            dst: Qkv,
        },
        Rotary {
            qk_norm,
            norm_after: false,
        },
        Attention { sinks: None },
        Project {
            src: Attn,
            weight: n.o(),
            bias: None,
            dst,
        },
    ]
}

/// The gated MLP on the residual stream, normalized with gain `norm` (as it is without),
/// gate and up `gate_up`, its output written to `dst` (added, into the residual stream).
pub(super) fn mlp(n: &Names, norm: Option<&str>, gate_up: Vec<Tensor>, dst: Buf) -> [Op; 3] {
    [
        NormedProject {
            src: Residual,
            norm: norm.map(|g| n.norm(g)),
            weights: gate_up,
            bias: None,
            dst: GateUp,
        },
        GatedActivation,
        Project {
            src: Act,
            weight: n.down(),
            bias: None,
            dst,
        },
    ]
}
