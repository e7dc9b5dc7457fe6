//! InternLM2 and InternLM2.5: Llama's layer ([`super::llama::layer`]) under its own names. Its
//! Hugging Face folders keep q, k and v in one tensor (`attention.wqkv`), grouped by KV head:
//! each group's query heads, then its key head and its value head, put in kiln's order (all
//! queries, then the keys, then the values) on load ([`super::NativeFolder`]); llama.cpp's
//! converter writes them apart, with Llama's rotary halves interleaved.

use super::native_names::NativeNames;

/// InternLM2's Hugging Face names of its tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "model.layers.",
    layer: &[
        ("attention_norm", "input_layernorm"),
        ("attention.wqkv", "self_attn.qkv_proj"),
        ("attention.wo", "self_attn.o_proj"),
        ("ffn_norm", "post_attention_layernorm"),
        ("feed_forward.w1", "mlp.gate_proj"),
        ("feed_forward.w3", "mlp.up_proj"),
        ("feed_forward.w2", "mlp.down_proj"),
    ],
    global: &[
        ("model.tok_embeddings", "model.embed_tokens"),
        ("model.norm", "model.norm"),
        ("output", "lm_head"),
    ],
};
