//! Mixtral (8x7B, 8x22B): Mistral's attention, and in place of its MLP a router
//! (`block_sparse_moe.gate`) choosing two of eight experts a token, each a gated MLP (`w1`
//! the gate, `w3` the up, `w2` the down), their weights the softmax of the chosen logits
//! ([`crate::Moe`] renormalized). llama.cpp's GGUF files are `llama` files with experts.

use super::Buf::Residual;
use super::llama::attention;
use super::{Layer, Names, Op};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    ops.push(Op::Experts(Box::new(n.experts(
        "block_sparse_moe.gate.weight",
        |e, kind| {
            let w = match kind {
                "gate" => "w1",
                "up" => "w3",
                _ => "w2",
            };
            format!("block_sparse_moe.experts.{e}.{w}.weight")
        },
    ))));
    Layer { ops }
}
