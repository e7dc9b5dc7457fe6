//! BLOOM (and BLOOMZ): the embeddings through a LayerNorm with a bias
//! (`word_embeddings_layernorm`, [`crate::Architecture::embedding_norm`]), then layers of two
//! LayerNorms with biases, attention then a MLP without a gate (GELU with the tanh
//! approximation) one after the other, biases on every product: GPT-NeoX's layer in its
//! sequential order ([`super::gpt_neox::layer_with`]). No position embedding: ALiBi's biases on
//! the attention scores ([`crate::ModelConfig::alibi`]) say where each key is.
//!
//! Hugging Face folders name the tensors their own way ([`NAMES`]; the original checkpoints,
//! `bigscience/bloom-560m` and the rest, without the `transformer.` prefix) and keep each
//! head's q, k and v rows together in `query_key_value` ([`super::NativeFolder`]), which the
//! loader puts in kiln's order, the order llama.cpp's converter writes into GGUF files.

use super::native_names::NativeNames;
use super::{Layer, gpt_neox};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    gpt_neox::layer_with(cfg, i, true)
}

/// BLOOM's Hugging Face names of its tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "transformer.h.",
    layer: &[
        ("input_layernorm", "input_layernorm"),
        ("self_attention.query_key_value", "self_attn.qkv_proj"),
        ("self_attention.dense", "self_attn.o_proj"),
        ("post_attention_layernorm", "post_attention_layernorm"),
        ("mlp.dense_h_to_4h", "mlp.up_proj"),
        ("mlp.dense_4h_to_h", "mlp.down_proj"),
    ],
    global: &[
        ("transformer.word_embeddings", "model.embed_tokens"),
        (
            "transformer.word_embeddings_layernorm",
            "model.embed_layernorm",
        ),
        ("transformer.ln_f", "model.norm"),
        ("lm_head", "lm_head"),
    ],
};
