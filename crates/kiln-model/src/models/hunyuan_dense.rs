//! Hunyuan (the dense models: Hunyuan-0.5B to 7B): Llama's layer with an RMSNorm over each
//! head of q and of k (`query_layernorm`, `key_layernorm`), applied after the rotary
//! embedding, where Qwen3's comes before it. Its RoPE base is stretched by a fixed NTK
//! `alpha` (the config's "dynamic" scaling with an `alpha`: `base * alpha^(d / (d - 2))`,
//! read by the config reader; llama.cpp's converter writes the stretched base).

use super::Buf::Residual;
use super::Op::Rotary;
use super::llama::{attention, mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let d = cfg.head_dim;
    let qk_norm =
        ["query", "key"].map(|p| n.tensor(&format!("self_attn.{p}_layernorm.weight"), &[d]));
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    ops[1] = Rotary {
        qk_norm: Some(qk_norm),
        norm_after: true,
    };
    ops.extend(mlp(
        &n,
        Some("post_attention_layernorm"),
        n.gate_up(),
        Residual,
    ));
    Layer { ops }
}
