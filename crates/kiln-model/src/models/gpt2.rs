//! GPT-2 and StarCoder (GPT-BigCode): a learned embedding of each position added to the
//! token's (`wpe`, [`crate::Architecture::learned_positions`]), then layers of two LayerNorms
//! with biases, attention (q, k and v one product, `c_attn`) and a MLP without a gate (GELU
//! with the tanh approximation) one after the other, biases on every product: GPT-NeoX's
//! layer in its sequential order ([`super::gpt_neox::layer_with`]), no dimension turning.
//! StarCoder's attention is multi-query (one KV head: `c_attn`'s rows are q, then the key
//! and the value), GPT-2's multi-head; both keep q, k and v one after the other, as kiln
//! runs them (StarCoder's rare multi-head folders, `multi_query` false, keep each head's
//! three together, put in kiln's order on load: [`super::NativeFolder`]).
//!
//! Their Hugging Face folders name the tensors their own way ([`NAMES`]; GPT-2's original
//! checkpoints without the `transformer.` prefix), and GPT-2's store each
//! product transposed (`Conv1D`: `[in, out]`, [`CONV1D`]), which the loader turns back.

use super::native_names::NativeNames;
use super::{Layer, gpt_neox};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    gpt_neox::layer_with(cfg, i, true)
}

const LAYER: &[(&str, &str)] = &[
    ("ln_1", "input_layernorm"),
    ("attn.c_attn", "self_attn.qkv_proj"),
    ("attn.c_proj", "self_attn.o_proj"),
    ("ln_2", "post_attention_layernorm"),
    ("mlp.c_fc", "mlp.up_proj"),
    ("mlp.c_proj", "mlp.down_proj"),
];

/// GPT-2's and StarCoder's Hugging Face names of their tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "transformer.h.",
    layer: LAYER,
    global: &[
        ("transformer.wte", "model.embed_tokens"),
        ("transformer.wpe", "model.embed_positions"),
        ("transformer.ln_f", "model.norm"),
        ("lm_head", "lm_head"),
    ],
};

/// The products GPT-2's folders store transposed (`Conv1D`), by kiln's names after a
/// layer's `model.layers.N.`.
pub(crate) const CONV1D: [&str; 4] = [
    "self_attn.qkv_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
];

/// The buffers GPT-2's, StarCoder's and GPT-J's checkpoints may store beside the weights (the causal
/// mask and its fill value), which change nothing.
pub(crate) fn is_stored_buffer(name: &str) -> bool {
    let layer = name.strip_prefix("transformer.").unwrap_or(name);
    layer.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))
}
