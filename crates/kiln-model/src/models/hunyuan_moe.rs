//! Hunyuan's mixture of experts (Hunyuan-A13B): Hunyuan's dense attention (per-head q/k
//! norms after the rotary embedding, [`super::hunyuan_dense`]), and in place of its MLP a
//! router (`mlp.gate.wg`) whose softmax, renormalized over the chosen experts, weighs them,
//! and a shared expert (`mlp.shared_mlp`) that every token runs.

use super::hunyuan_dense::attention;
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n);
    let experts = n.experts("mlp.gate.wg.weight", |e, kind| {
        format!("mlp.experts.{e}.{kind}_proj.weight")
    });
    ops.extend(n.with_shared_expert("mlp.shared_mlp", experts));
    Layer { ops }
}
