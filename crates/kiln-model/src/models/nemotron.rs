//! Nemotron (Nemotron-4 Minitron 4B and 8B, Nemotron-Mini 4B): StableLM's LayerNorms with
//! biases before attention and before a MLP without a gate, `down(relu(up x)^2)` (Arcee's).
//! Its LayerNorms' gains are stored minus one in Hugging Face files ([`ModelConfig`]'s gain
//! offset; llama.cpp's converter adds the one), and half of each head turns unless the
//! config gives another `partial_rotary_factor`.

use super::normed::{attention, layer_norm, ungated_mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", true)];
    ops.extend(attention(&n, "self_attn.o_proj", false));
    ops.push(layer_norm(&n, "post_attention_layernorm", true));
    ops.extend(ungated_mlp(&n, ("mlp.up_proj", "mlp.down_proj"), false));
    Layer { ops }
}
