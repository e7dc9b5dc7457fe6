//! OLMo (OLMo 1B and 7B, OLMo 1.7): Llama's attention and gated MLP, one after the other, each
//! on a LayerNorm of the residual stream that has neither gain nor bias. Its files store no
//! tensor for those norms; the loader gives them gains of one
//! ([`crate::Architecture::norms_without_gain`]), so the LayerNorm launches are Cohere's.

use super::normed::{attention, gated_mlp, layer_norm};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", false)];
    ops.extend(attention(&n, "self_attn.o_proj", false));
    ops.push(layer_norm(&n, "post_attention_layernorm", false));
    ops.extend(gated_mlp(&n));
    Layer { ops }
}
