//! OLMo 2: Llama's attention and gated MLP with the norms moved: each sub-layer reads the
//! residual stream as it is and its output is RMS-normalized on its way back into it (Gemma's
//! post-norms without the pre-norms), and q and k are each RMS-normalized as a whole (one gain
//! as wide as q, one as wide as k) before the rotary embedding. OLMo 3 is the same layer with
//! windows on three layers of four, whose sliding layers turn without the global layers'
//! RoPE scaling ([`ModelConfig`]).

use super::Buf::{Attn, Proj, Qkv, Residual};
use super::Op::{AddNormed, Attention, NormedProject, Project, Rotary};
use super::llama::mlp;
use super::{Layer, Names, Tensor};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let (q, kv) = (
        cfg.num_heads * cfg.head_dim,
        cfg.num_kv_heads * cfg.head_dim,
    );
    let qk_norm =
        [("q", q), ("k", kv)].map(|(p, w)| n.tensor(&format!("self_attn.{p}_norm.weight"), &[w]));
    post_normed(&n, qk_norm)
}

/// Attention (q and k normalized by `qk_norm`) and the MLP on the residual stream as it is,
/// each output normalized into it: OLMo 2's layer, and EXAONE 4's.
pub(super) fn post_normed(n: &Names, qk_norm: [Tensor; 2]) -> Layer {
    let mut ops = vec![
        NormedProject {
            src: Residual,
            norm: None,
            weights: n.qkv(),
            bias: None,
            dst: Qkv,
        },
        Rotary {
            qk_norm: Some(qk_norm),
            norm_after: false,
        },
        Attention { sinks: None },
        Project {
            src: Attn,
            weight: n.o(),
            bias: None,
            dst: Proj,
        },
        AddNormed {
            src: Proj,
            norm: n.norm("post_attention_layernorm"),
        },
    ];
    ops.extend(mlp(n, None, n.gate_up(), Proj));
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_feedforward_layernorm"),
    });
    Layer { ops }
}
