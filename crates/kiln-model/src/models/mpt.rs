//! MPT (MPT-7B, MPT-30B, their chat and instruct models): GPT-NeoX's layer in its sequential
//! order ([`super::gpt_neox::layer_with`]) without any bias: LayerNorms without them, q, k
//! and v one product (`Wqkv`), one after the other as kiln runs them, and a MLP without a
//! gate whose GELU is the exact one. No position embedding: ALiBi's biases on the attention
//! scores ([`crate::ModelConfig::alibi`], its config's `alibi_bias_max`) say where each key
//! is. Tied embeddings. Its Hugging Face folders name the tensors their own way ([`NAMES`]).

use super::native_names::NativeNames;
use super::{Layer, gpt_neox};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    gpt_neox::layer_with(cfg, i, false)
}

/// MPT's Hugging Face names of its tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "transformer.blocks.",
    layer: &[
        ("norm_1", "input_layernorm"),
        ("attn.Wqkv", "self_attn.qkv_proj"),
        ("attn.out_proj", "self_attn.o_proj"),
        ("norm_2", "post_attention_layernorm"),
        ("ffn.up_proj", "mlp.up_proj"),
        ("ffn.down_proj", "mlp.down_proj"),
    ],
    global: &[
        ("transformer.wte", "model.embed_tokens"),
        ("transformer.norm_f", "model.norm"),
        ("lm_head", "lm_head"),
    ],
};
