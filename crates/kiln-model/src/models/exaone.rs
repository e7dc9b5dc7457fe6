//! EXAONE 3.0 and 3.5 (and EXAONE Deep): Llama's layer ([`super::llama::layer`]) under names of
//! GPT-2's kind: `transformer.h.N.ln_1`, `attn.attention.q_proj`, `mlp.c_fc_0` (the gate),
//! `mlp.c_fc_1` (up), `mlp.c_proj` (down). Its rotary halves are as Hugging Face's Llama keeps
//! them, in its folders and in llama.cpp's files alike.

use super::native_names::NativeNames;

/// EXAONE's Hugging Face names of its tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "transformer.h.",
    layer: &[
        ("ln_1", "input_layernorm"),
        ("attn.attention.q_proj", "self_attn.q_proj"),
        ("attn.attention.k_proj", "self_attn.k_proj"),
        ("attn.attention.v_proj", "self_attn.v_proj"),
        ("attn.attention.out_proj", "self_attn.o_proj"),
        ("ln_2", "post_attention_layernorm"),
        ("mlp.c_fc_0", "mlp.gate_proj"),
        ("mlp.c_fc_1", "mlp.up_proj"),
        ("mlp.c_proj", "mlp.down_proj"),
    ],
    global: &[
        ("transformer.wte", "model.embed_tokens"),
        ("transformer.ln_f", "model.norm"),
        ("lm_head", "lm_head"),
    ],
};
