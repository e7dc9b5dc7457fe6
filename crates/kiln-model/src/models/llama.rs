//! Llama (Llama 2 and 3, SmolLM2, TinyLlama, Mistral): pre-norm attention and a SiLU-gated
//! MLP, each added to the residual stream; grouped-query attention with rotary embeddings; no
//! biases. The layout the other families extend.

use super::Buf::{Act, Attn, GateUp, Qkv, Residual};
use super::Op::{Attention, GatedActivation, NormedProject, Project, Rotary};
use super::{Buf, Layer, Names, Op};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![
        NormedProject {
            norm: n.norm("input_layernorm"),
            weights: n.qkv(),
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
    ops.extend(mlp(&n, "post_attention_layernorm", n.gate_up(), Residual));
    Layer { ops }
}

/// The gated MLP on the normalized residual stream (norm gain `norm`, gate and up
/// `gate_up`), its output written to `dst` (added, into the residual stream).
pub(super) fn mlp(n: &Names, norm: &str, gate_up: Vec<super::Tensor>, dst: Buf) -> [Op; 3] {
    [
        NormedProject {
            norm: n.norm(norm),
            weights: gate_up,
            bias: None,
            dst: GateUp,
        },
        GatedActivation,
        Project {
            src: Act,
            weight: n.down(),
            dst,
        },
    ]
}
