//! Qwen3's mixtures of experts (Qwen3-30B-A3B and its coder): Qwen3's attention (per-head
//! q/k norms), and in place of the MLP a router and its experts ([`crate::Moe`]): every
//! expert is a gated MLP of `moe_intermediate_size`, the router (`mlp.gate`) a row of logits
//! an expert. Hugging Face folders store each expert's matrices apart
//! (`mlp.experts.{e}.gate_proj`); llama.cpp's GGUF files stack them in one tensor of three
//! dimensions a kind (`ffn_gate_exps`), which the loader reads as the same per-expert
//! tensors.

use super::Buf::Residual;
use super::Op::Experts;
use super::llama::attention;
use super::{Layer, Names, Tensor};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let moe = cfg.moe.expect("a Qwen3 MoE config has experts (validated)");
    let (h, ff) = (cfg.hidden_size, moe.intermediate_size);
    let experts = |p: &str, shape: &[usize]| -> Vec<Tensor> {
        (0..moe.experts)
            .map(|e| n.tensor(&format!("mlp.experts.{e}.{p}_proj.weight"), shape))
            .collect()
    };
    let mut ops = attention(&n, n.qkv(), Some(n.qk_norm()), Residual).to_vec();
    ops.push(Experts {
        norm: n.norm("post_attention_layernorm"),
        router: n.tensor("mlp.gate.weight", &[moe.experts, h]),
        gate_up: [experts("gate", &[ff, h]), experts("up", &[ff, h])].concat(),
        down: experts("down", &[h, ff]),
    });
    Layer { ops }
}
