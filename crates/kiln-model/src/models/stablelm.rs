//! StableLM (StableLM 2 1.6B and 12B, StableLM 3B 4E1T, Zephyr 3B, StableCode 3B): Llama's
//! layer with a LayerNorm, biases included, before attention and before the MLP (each into a
//! buffer of its own that the sub-layer's products read), q/k/v biases where the config says
//! (`use_qkv_bias`), and a rotary embedding on the first quarter of each head unless the
//! config gives another `partial_rotary_factor`. StableLM 2 12B runs attention and the MLP
//! side by side on the first LayerNorm (`use_parallel_residual`: Command-R's order, the
//! second LayerNorm gone) and LayerNorms each head of q and k with a gain of its own
//! (`qk_layernorm`).

use super::normed::{attention, gated_mlp, layer_norm};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", true)];
    ops.extend(attention(&n, "self_attn.o_proj", false));
    if !cfg.parallel_residual {
        ops.push(layer_norm(&n, "post_attention_layernorm", true));
    }
    ops.extend(gated_mlp(&n));
    Layer { ops }
}
