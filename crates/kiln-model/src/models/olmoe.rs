//! OLMoE (OLMoE-1B-7B): Llama's pre-norm layer with q and k each RMS-normalized whole
//! before the rotary embedding (as OLMo 2's: a gain as wide as q, and as k), and in place of
//! the MLP a router choosing 8 of 64 experts a token, their weights the softmax's over all
//! experts, not renormalized ([`crate::Moe`]), under Qwen3 MoE's names.

use super::Buf::Residual;
use super::llama::attention;
use super::{Layer, Names, Op};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let d = cfg.head_dim;
    let qk_norm = [("q", cfg.num_heads * d), ("k", cfg.num_kv_heads * d)]
        .map(|(p, w)| n.tensor(&format!("self_attn.{p}_norm.weight"), &[w]));
    let mut ops = attention(&n, n.qkv(), Some(qk_norm), Residual).to_vec();
    ops.push(Op::Experts(Box::new(
        n.experts("mlp.gate.weight", |e, kind| {
            format!("mlp.experts.{e}.{kind}_proj.weight")
        }),
    )));
    Layer { ops }
}
