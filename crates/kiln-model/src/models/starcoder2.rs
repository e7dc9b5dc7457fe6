//! StarCoder2 (3B, 7B, 15B): StableLM's LayerNorms with biases before attention and the MLP,
//! biases on q, k, v, the attention's output and both of the MLP's products where the config
//! says (`use_bias`, the released models' choice), and a MLP without a gate,
//! `c_proj(gelu(c_fc x))` (GELU with the tanh approximation). Its window, where the config has
//! one, is on every layer, as Mistral's.

use super::normed::{attention, layer_norm, ungated_mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let biases = cfg.attention_bias;
    let mut ops = vec![layer_norm(&n, "input_layernorm", true)];
    ops.extend(attention(&n, "self_attn.o_proj", biases));
    ops.push(layer_norm(&n, "post_attention_layernorm", true));
    ops.extend(ungated_mlp(&n, ("mlp.c_fc", "mlp.c_proj"), biases));
    Layer { ops }
}
