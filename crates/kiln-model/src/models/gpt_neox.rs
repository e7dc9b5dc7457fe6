//! GPT-NeoX (Pythia, GPT-NeoX-20B, Dolly v2, RedPajama-INCITE, StableLM-Alpha): two
//! LayerNorms with biases, q/k/v as one product (`query_key_value`) with a bias, its output
//! (`dense`) with a bias, and a MLP without a gate, `dense_4h_to_h(gelu(dense_h_to_4h x))`,
//! biases on both. With `use_parallel_residual` (Pythia's, the default) attention reads the
//! first LayerNorm and the MLP the second, both taken of the same residual stream:
//! `x + attn(ln1(x)) + mlp(ln2(x))`, so the second is taken into a buffer of its own before
//! attention adds to the stream; without it the layer is StableLM's order. The first quarter
//! of each head turns (`rotary_pct`), its halves half the rotary width apart.
//!
//! Hugging Face folders keep each head's q, k and v rows together in `query_key_value`;
//! [`stored_qkv`] names that layout, which the loader puts back into kiln's (all of q, then
//! k, then v), the order llama.cpp's converter writes into GGUF files.

use super::normed::{attention, layer_norm, layer_norm_into, ungated_mlp_on};
use super::{Buf, Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let bias = cfg.attention_bias;
    let mlp = ("mlp.up_proj", "mlp.down_proj");
    let mut ops = vec![layer_norm(&n, "input_layernorm", true)];
    if cfg.parallel_residual {
        ops.push(layer_norm_into(
            &n,
            "post_attention_layernorm",
            true,
            Buf::Proj,
        ));
        ops.extend(attention(&n, "self_attn.o_proj", bias));
        ops.extend(ungated_mlp_on(&n, Buf::Proj, mlp, true));
    } else {
        ops.extend(attention(&n, "self_attn.o_proj", bias));
        ops.push(layer_norm(&n, "post_attention_layernorm", true));
        ops.extend(ungated_mlp_on(&n, Buf::Normed, mlp, true));
    }
    Layer { ops }
}

/// Hugging Face's names of GPT-NeoX's tensors outside the layers, and kiln's.
const GLOBAL_NAMES: &[(&str, &str)] = &[
    ("gpt_neox.embed_in", "model.embed_tokens"),
    ("gpt_neox.final_layer_norm", "model.norm"),
    ("embed_out", "lm_head"),
];

/// Hugging Face's names of a layer's tensors (after `gpt_neox.layers.N.`), and kiln's
/// (after `model.layers.N.`).
const LAYER_NAMES: &[(&str, &str)] = &[
    ("input_layernorm", "input_layernorm"),
    ("post_attention_layernorm", "post_attention_layernorm"),
    ("attention.query_key_value", "self_attn.qkv_proj"),
    ("attention.dense", "self_attn.o_proj"),
    ("mlp.dense_h_to_4h", "mlp.up_proj"),
    ("mlp.dense_4h_to_h", "mlp.down_proj"),
];

/// The buffers older GPT-NeoX checkpoints store beside the weights (the causal mask and its
/// fill value), which change nothing.
pub(crate) fn is_stored_buffer(name: &str) -> bool {
    name.starts_with("gpt_neox.layers.")
        && (name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias"))
}

/// Kiln's name of the GPT-NeoX tensor Hugging Face names `hf`, if it is one of its weights.
pub(crate) fn kiln_name(hf: &str) -> Option<String> {
    rename(hf, ("gpt_neox.layers.", "model.layers."), |(h, k)| (h, k))
}

/// Hugging Face's name of the GPT-NeoX tensor kiln names `kiln` (the inverse of
/// [`kiln_name`]).
pub(crate) fn hf_name(kiln: &str) -> Option<String> {
    rename(kiln, ("model.layers.", "gpt_neox.layers."), |(h, k)| (k, h))
}

/// `name` renamed by the tables, read from one side to the other by `pick` (`(from, to)`),
/// layers' prefixes `from.0` becoming `from.1`.
fn rename(
    name: &str,
    (layers, to_layers): (&str, &str),
    pick: impl Fn((&'static str, &'static str)) -> (&'static str, &'static str),
) -> Option<String> {
    let (base, suffix) = name.rsplit_once('.')?;
    if let Some(rest) = base.strip_prefix(layers) {
        let (i, part) = rest.split_once('.')?;
        let (_, to) = (LAYER_NAMES.iter().map(|&p| pick(p))).find(|(from, _)| *from == part)?;
        return Some(format!("{to_layers}{i}.{to}.{suffix}"));
    }
    let (_, to) = (GLOBAL_NAMES.iter().map(|&p| pick(p))).find(|(from, _)| *from == base)?;
    Some(format!("{to}.{suffix}"))
}

/// Each of layer `i`'s `query_key_value` tensors (weight and bias) in kiln's name, as Hugging
/// Face folders store their rows: head by head, each head's q, k and v together.
pub(crate) fn stored_qkv(cfg: &ModelConfig) -> Vec<String> {
    (0..cfg.num_layers)
        .flat_map(|i| {
            ["weight", "bias"].map(|s| format!("model.layers.{i}.self_attn.qkv_proj.{s}"))
        })
        .collect()
}
