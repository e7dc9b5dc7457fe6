//! Gemma 2: Llama's attention and gated MLP, each sub-layer's output RMS-normalized on its
//! way into the residual stream (and the MLP's input by a norm of its own). What else sets it
//! apart is in [`ModelConfig`]: a GELU (tanh) gated MLP, embeddings scaled by sqrt(hidden
//! size), tied output, sliding-window layers alternating with global ones, queries scaled by
//! `query_pre_attn_scalar`, and attention scores and output logits soft-capped
//! (`cap * tanh(x / cap)`). Hugging Face stores its norm gains minus one; GGUF files store the
//! gains.

use super::Buf::Proj;
use super::Op::AddNormed;
use super::llama::{attention, mlp};
use super::{Layer, Names, Tensor};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    normed_sublayers(&Names::new(cfg, i), None)
}

/// Attention (with per-head q/k norms if `qk_norm`) and the MLP, each output normalized into
/// the residual stream: Gemma's layer.
pub(super) fn normed_sublayers(n: &Names, qk_norm: Option<[Tensor; 2]>) -> Layer {
    let mut ops = attention(n, n.qkv(), qk_norm, Proj).to_vec();
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_attention_layernorm"),
    });
    ops.extend(mlp(n, Some("pre_feedforward_layernorm"), n.gate_up(), Proj));
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_feedforward_layernorm"),
    });
    Layer { ops }
}
