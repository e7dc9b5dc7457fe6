//! Qwen3's mixtures of experts (Qwen3-30B-A3B and its coder): Qwen3's attention (per-head
//! q/k norms), and in place of the MLP a router and its experts ([`crate::Moe`]): every
//! expert is a gated MLP of `moe_intermediate_size`, the router (`mlp.gate`) a row of logits
//! an expert. Hugging Face folders store each expert's matrices apart
//! (`mlp.experts.{e}.gate_proj`); llama.cpp's GGUF files stack them in one tensor of three
//! dimensions a kind (`ffn_gate_exps`), which the loader reads as the same per-expert
//! tensors.

use super::Buf::Residual;
use super::llama::attention;
use super::{Layer, Names, Op};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), Some(n.qk_norm()), Residual).to_vec();
    ops.push(Op::Experts(Box::new(
        n.experts("mlp.gate.weight", |e, kind| {
            format!("mlp.experts.{e}.{kind}_proj.weight")
        }),
    )));
    Layer { ops }
}
