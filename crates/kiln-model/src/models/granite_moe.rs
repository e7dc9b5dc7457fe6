//! Granite's mixtures of experts (Granite 3.0/3.1 1B-A400M and 3B-A800M; GraniteMoeShared):
//! Granite's layer and multipliers ([`ModelConfig::granite`]: the experts' output, and the
//! shared expert's, scaled like any sub-layer's on its way into the residual stream), with a
//! router (`block_sparse_moe.router.layer`) choosing experts of the MLP's size, their weights
//! the softmax of the chosen logits, and in GraniteMoeShared a shared expert (`shared_mlp`)
//! beside them. The files stack the experts' matrices (`block_sparse_moe.input_linear`: each
//! expert's gate rows, then its up rows) and the shared expert's gate and up; the loaders read
//! them as the per-expert matrices named here.

use super::Buf::Residual;
use super::llama::attention;
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    let experts = n.experts("block_sparse_moe.router.layer.weight", |e, kind| {
        format!("block_sparse_moe.experts.{e}.{kind}_proj.weight")
    });
    ops.extend(n.with_shared_expert("shared_mlp", experts));
    Layer { ops }
}
