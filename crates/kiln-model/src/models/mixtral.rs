//! Mixtral (8x7B, 8x22B): Mistral's attention, and in place of its MLP a router
//! (`block_sparse_moe.gate`) choosing two of eight experts a token, each a gated MLP (`w1`
//! the gate, `w3` the up, `w2` the down), their weights the softmax of the chosen logits
//! ([`crate::Moe`] renormalized). llama.cpp's GGUF files are `llama` files with experts.

use super::Buf::Residual;
use super::Op::Experts;
use super::llama::attention;
use super::{Layer, Names, Tensor};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let moe = cfg.moe.expect("a Mixtral config has experts (validated)");
    let (h, ff) = (cfg.hidden_size, moe.intermediate_size);
    let experts = |w: &str, shape: &[usize]| -> Vec<Tensor> {
        (0..moe.experts)
            .map(|e| n.tensor(&format!("block_sparse_moe.experts.{e}.{w}.weight"), shape))
            .collect()
    };
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    ops.push(Experts {
        norm: n.norm("post_attention_layernorm"),
        router: n.tensor("block_sparse_moe.gate.weight", &[moe.experts, h]),
        gate_up: [experts("w1", &[ff, h]), experts("w3", &[ff, h])].concat(),
        down: experts("w2", &[h, ff]),
    });
    Layer { ops }
}
