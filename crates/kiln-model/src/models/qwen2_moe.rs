//! Qwen2's mixtures of experts (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (q/k/v
//! biases), and in place of the MLP Qwen3 MoE's router and experts plus a shared expert
//! (`mlp.shared_expert`, a gated MLP of its own size) that every token runs, its output
//! scaled by the sigmoid of one more row (`mlp.shared_expert_gate`) times the normalized
//! input.

use super::Buf::Residual;
use super::llama::attention;
use super::{Experts, Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    let experts = Experts {
        shared_gate: Some(n.tensor("mlp.shared_expert_gate.weight", &[1, cfg.hidden_size])),
        ..n.experts("mlp.gate.weight", |e, kind| {
            format!("mlp.experts.{e}.{kind}_proj.weight")
        })
    };
    ops.extend(n.with_shared_expert("mlp.shared_expert", experts));
    Layer { ops }
}
