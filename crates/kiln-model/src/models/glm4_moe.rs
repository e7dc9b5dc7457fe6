//! GLM-4.5 and GLM-4.6 (and the Air models): Llama's attention with q/k/v biases and a
//! rotary embedding on the first half of each head (its pairs half a rotary width apart, as
//! Llama's: no reordering, unlike GLM-4's); the first `first_k_dense_replace` layers with a
//! gated MLP, the others with a mixture of experts chosen by sigmoid scores plus a bias of
//! each expert's ([`crate::Scoring::Sigmoid`]) and a shared expert (`mlp.shared_experts`)
//! that every token runs. The files' multi-token-prediction layer after the last is not read.

use super::Buf::Residual;
use super::llama::{attention, mlp};
use super::{Experts, Layer, Names, Op};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    ops.extend(mlp_or_experts(&n));
    Layer { ops }
}

/// A dense layer's gated MLP, or the mixture: experts chosen with each one's bias
/// (`mlp.gate.e_score_correction_bias`) and a shared expert where the config has one.
pub(super) fn mlp_or_experts(n: &Names) -> Vec<Op> {
    match n.cfg.moe.filter(|m| n.i >= m.first_layer) {
        None => mlp(n, Some("post_attention_layernorm"), n.gate_up(), Residual).to_vec(),
        Some(m) => {
            let bias = n.tensor("mlp.gate.e_score_correction_bias", &[m.experts]);
            let experts = Experts {
                choice_bias: Some(bias),
                ..n.experts("mlp.gate.weight", |e, kind| {
                    format!("mlp.experts.{e}.{kind}_proj.weight")
                })
            };
            n.with_shared_expert("mlp.shared_experts", experts)
        }
    }
}
