//! Hunyuan (the dense models: Hunyuan-0.5B to 7B): Llama's layer with an RMSNorm over each
//! head of q and of k (`query_layernorm`, `key_layernorm`), applied after the rotary
//! embedding, where Qwen3's comes before it. Its RoPE base is stretched by a fixed NTK
//! `alpha` (the config's "dynamic" scaling with an `alpha`: `base * alpha^(d / (d - 2))`,
//! read by the config reader; llama.cpp's converter writes the stretched base).

use super::Buf::Residual;
use super::Op::{self, Rotary};
use super::llama::{self, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n);
    ops.extend(mlp(
        &n,
        Some("post_attention_layernorm"),
        n.gate_up(),
        Residual,
    ));
    Layer { ops }
}

/// Llama's attention with the per-head q/k norms after the rotary embedding.
pub(super) fn attention(n: &Names) -> Vec<Op> {
    let d = n.cfg.head_dim;
    let qk_norm =
        ["query", "key"].map(|p| n.tensor(&format!("self_attn.{p}_layernorm.weight"), &[d]));
    let mut ops = llama::attention(n, n.qkv(), Some(qk_norm), Residual).to_vec();
    for op in &mut ops {
        if let Rotary { norm_after, .. } = op {
            *norm_after = true;
        }
    }
    ops
}
