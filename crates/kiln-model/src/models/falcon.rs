//! Falcon (7B, 40B, 180B, Falcon 2 11B): GPT-NeoX's layer ([`super::gpt_neox::layer_with`]),
//! always side by side: attention and a MLP without a gate (exact GELU) on one LayerNorm
//! (7B's `input_layernorm`, Falcon 2 11B's) or each on its own, taken of the same stream
//! (`ln_attn`, `ln_mlp`: 40B's and 180B's, `ModelConfig::mlp_norm`); biases on the products
//! only where the config says (`bias`; the LayerNorms always have theirs); every dimension of
//! a head turning. Its attention is multi-query (7B: one KV head) or grouped (the
//! `new_decoder_architecture` ones), q, k and v one product (`query_key_value`) whose rows
//! Hugging Face folders keep by KV head, each group's queries, then its key and value
//! ([`stored_qkv`]); llama.cpp's converter writes them one after the other, as kiln runs them.

use super::native_names::NativeNames;
use super::{Layer, gpt_neox};
use crate::ModelConfig;
use crate::weights::StoredRows;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    gpt_neox::layer_with(cfg, i, cfg.attention_bias)
}

const ATTENTION: [(&str, &str); 2] = [
    ("self_attention.query_key_value", "self_attn.qkv_proj"),
    ("self_attention.dense", "self_attn.o_proj"),
];
const MLP: [(&str, &str); 2] = [
    ("mlp.dense_h_to_4h", "mlp.up_proj"),
    ("mlp.dense_4h_to_h", "mlp.down_proj"),
];
const GLOBAL: &[(&str, &str)] = &[
    ("transformer.word_embeddings", "model.embed_tokens"),
    ("transformer.ln_f", "model.norm"),
    ("lm_head", "lm_head"),
];

/// The names of a Falcon with one LayerNorm a layer (7B, Falcon 2 11B).
const ONE_NORM: NativeNames = NativeNames {
    layers: "transformer.h.",
    layer: &[
        ("input_layernorm", "input_layernorm"),
        ATTENTION[0],
        ATTENTION[1],
        MLP[0],
        MLP[1],
    ],
    global: GLOBAL,
};

/// The names of a Falcon with two (40B, 180B): attention's and the MLP's.
const TWO_NORMS: NativeNames = NativeNames {
    layers: "transformer.h.",
    layer: &[
        ("ln_attn", "input_layernorm"),
        ("ln_mlp", "post_attention_layernorm"),
        ATTENTION[0],
        ATTENTION[1],
        MLP[0],
        MLP[1],
    ],
    global: GLOBAL,
};

/// The names of `cfg`'s Falcon folders.
pub(crate) fn names(cfg: &ModelConfig) -> &'static NativeNames {
    match cfg.mlp_norm {
        true => &TWO_NORMS,
        false => &ONE_NORM,
    }
}

/// How `cfg`'s folders store `query_key_value`'s rows: by KV head (the grouped ones'), or, with
/// one KV head (multi-query: 7B's), as kiln runs them.
pub(crate) fn stored_qkv(cfg: &ModelConfig) -> Option<StoredRows> {
    (cfg.num_kv_heads > 1).then(|| StoredRows::QkvByGroup {
        kv_heads: cfg.num_kv_heads,
        q_per_kv: cfg.num_heads / cfg.num_kv_heads,
    })
}
