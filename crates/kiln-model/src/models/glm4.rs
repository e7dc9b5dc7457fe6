//! GLM-4 (the 0414 models: GLM-4-9B/32B-0414, GLM-Z1): Llama's attention (with q/k/v biases)
//! and gated MLP (gate and up in one tensor), each sub-layer's output RMS-normalized on its
//! way into the residual stream as well. Its rotary embedding turns the first half of each
//! head ([`ModelConfig`]'s partial rotary dimensions), with each pair's two rows side by side
//! in q and k; the loaders put them half a rotary width apart, as kiln runs every model
//! ([`super::interleaved_rows`]).

use super::Buf::Proj;
use super::Op::AddNormed;
use super::llama::{attention, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let gate_up = n.tensor(
        "mlp.gate_up_proj.weight",
        &[2 * cfg.intermediate_size, cfg.hidden_size],
    );
    let mut ops = attention(&n, n.qkv(), None, Proj).to_vec();
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_self_attn_layernorm"),
    });
    ops.extend(mlp(
        &n,
        Some("post_attention_layernorm"),
        vec![gate_up],
        Proj,
    ));
    ops.push(AddNormed {
        src: Proj,
        norm: n.norm("post_mlp_layernorm"),
    });
    Layer { ops }
}
