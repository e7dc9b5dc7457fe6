//! GPT-NeoX (Pythia, GPT-NeoX-20B, Dolly v2, RedPajama-INCITE, StableLM-Alpha): two
//! LayerNorms with biases, q/k/v as one product (`query_key_value`) with a bias, its output
//! (`dense`) with a bias, and a MLP without a gate, `dense_4h_to_h(gelu(dense_h_to_4h x))`,
//! biases on both. With `use_parallel_residual` (Pythia's, the default) attention reads the
//! first LayerNorm and the MLP the second, both taken of the same residual stream:
//! `x + attn(ln1(x)) + mlp(ln2(x))`, so the second is taken into a buffer of its own before
//! attention adds to the stream (`ModelConfig::mlp_norm`; Falcon 7B's MLP reads the first);
//! without it the layer is StableLM's order. The first quarter
//! of each head turns (`rotary_pct`), its halves half the rotary width apart.
//!
//! Hugging Face folders name the tensors their own way ([`NAMES`]) and keep each head's q, k
//! and v rows together in `query_key_value` ([`super::NativeFolder`]), which the loader puts
//! in kiln's order (all of q, then k, then v), the order llama.cpp's converter writes into
//! GGUF files.

use super::native_names::NativeNames;
use super::normed::{attention, layer_norm, layer_norm_into, ungated_mlp_on};
use super::{Buf, Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    layer_with(cfg, i, true)
}

/// Layer `i` (GPT-NeoX's, or Falcon's, GPT-2's, BLOOM's, MPT's), biases on the MLP's products
/// where `mlp_bias` (the LayerNorms' where the architecture's norms have them).
pub(super) fn layer_with(cfg: &ModelConfig, i: usize, mlp_bias: bool) -> Layer {
    let n = Names::new(cfg, i);
    let (bias, norm_bias) = (cfg.attention_bias, cfg.architecture.norm_bias());
    let mlp = ("mlp.up_proj", "mlp.down_proj");
    let mut ops = vec![layer_norm(&n, "input_layernorm", norm_bias)];
    if cfg.parallel_residual {
        let src = match cfg.mlp_norm {
            true => {
                let role = "post_attention_layernorm";
                ops.push(layer_norm_into(&n, role, norm_bias, Buf::Proj));
                Buf::Proj
            }
            false => Buf::Normed,
        };
        ops.extend(attention(&n, "self_attn.o_proj", bias));
        ops.extend(ungated_mlp_on(&n, src, mlp, mlp_bias));
    } else {
        ops.extend(attention(&n, "self_attn.o_proj", bias));
        ops.push(layer_norm(&n, "post_attention_layernorm", norm_bias));
        ops.extend(ungated_mlp_on(&n, Buf::Normed, mlp, mlp_bias));
    }
    Layer { ops }
}

/// GPT-NeoX's Hugging Face names of its tensors, and kiln's.
pub(crate) const NAMES: NativeNames = NativeNames {
    layers: "gpt_neox.layers.",
    layer: &[
        ("input_layernorm", "input_layernorm"),
        ("post_attention_layernorm", "post_attention_layernorm"),
        ("attention.query_key_value", "self_attn.qkv_proj"),
        ("attention.dense", "self_attn.o_proj"),
        ("mlp.dense_h_to_4h", "mlp.up_proj"),
        ("mlp.dense_4h_to_h", "mlp.down_proj"),
    ],
    global: &[
        ("gpt_neox.embed_in", "model.embed_tokens"),
        ("gpt_neox.final_layer_norm", "model.norm"),
        ("embed_out", "lm_head"),
    ],
};

/// The buffers older GPT-NeoX checkpoints store beside the weights (the causal mask and its
/// fill value), which change nothing.
pub(crate) fn is_stored_buffer(name: &str) -> bool {
    name.starts_with("gpt_neox.layers.")
        && (name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias"))
}
