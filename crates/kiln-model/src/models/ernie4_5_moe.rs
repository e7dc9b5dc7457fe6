//! ERNIE 4.5's mixtures of experts (ERNIE-4.5-21B-A3B, 300B-A47B): ERNIE 4.5's attention (its
//! rotary pairs side by side in the stored q and k rows), the layers before
//! `moe_layer_start_index` with a gated MLP, the others with a router whose softmax scores
//! plus a bias of each expert's (`mlp.moe_statics.e_score_correction_bias`) choose the
//! experts, weighted by the scores renormalized, and shared experts (`mlp.shared_experts`,
//! one gated MLP) that every token runs. The files' multi-token-prediction tensors are not
//! read.

use super::Buf::Residual;
use super::llama::{attention, mlp};
use super::{Experts, Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    match cfg.moe.filter(|m| i >= m.first_layer) {
        None => ops.extend(mlp(
            &n,
            Some("post_attention_layernorm"),
            n.gate_up(),
            Residual,
        )),
        Some(m) => {
            let bias = "mlp.moe_statics.e_score_correction_bias";
            let experts = Experts {
                choice_bias: Some(n.tensor(bias, &[1, m.experts])),
                ..n.experts("mlp.gate.weight", |e, kind| {
                    format!("mlp.experts.{e}.{kind}_proj.weight")
                })
            };
            ops.extend(n.with_shared_expert("mlp.shared_experts", experts));
        }
    }
    Layer { ops }
}
