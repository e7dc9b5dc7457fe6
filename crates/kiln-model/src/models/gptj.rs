//! GPT-J (GPT-J-6B, GPT4All-J, Pygmalion 6B): Phi-2's layer without the attention's biases.
//! One LayerNorm with a bias, which attention and a MLP without a gate, `fc_out(gelu(fc_in
//! x))` (GELU with the tanh approximation), both read side by side; q, k, v and the
//! attention's output have no bias, the MLP's products and the LM head have one. The first
//! `rotary_dim` dimensions of each head turn (64 of GPT-J-6B's 256), each rotary pair side by
//! side in the stored q and k rows, put half the rotary width apart on load
//! ([`super::interleaved_rows`]). Its Hugging Face folders name the tensors their own way
//! ([`NAMES`]) and may hold the causal mask GPT-2's do ([`super::gpt2::is_stored_buffer`]).

use super::native_names::NativeNames;
use super::normed::{attention, layer_norm, ungated_mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", true)];
    ops.extend(attention(&n, "self_attn.o_proj", false));
    ops.extend(ungated_mlp(&n, ("mlp.up_proj", "mlp.down_proj"), true));
    Layer { ops }
}

/// GPT-J's Hugging Face names of its tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "transformer.h.",
    layer: &[
        ("ln_1", "input_layernorm"),
        ("attn.q_proj", "self_attn.q_proj"),
        ("attn.k_proj", "self_attn.k_proj"),
        ("attn.v_proj", "self_attn.v_proj"),
        ("attn.out_proj", "self_attn.o_proj"),
        ("mlp.fc_in", "mlp.up_proj"),
        ("mlp.fc_out", "mlp.down_proj"),
    ],
    global: &[
        ("transformer.wte", "model.embed_tokens"),
        ("transformer.ln_f", "model.norm"),
        ("lm_head", "lm_head"),
    ],
};
