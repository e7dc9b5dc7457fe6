//! Cohere's Command-R (Command-R, Aya 23, Aya Expanse): one LayerNorm (mean subtracted, no
//! bias) of the residual stream, which attention and the gated MLP both read, side by side;
//! each adds its output to the stream (attention's first: the MLP reads the norm taken
//! before it). Its rotary pairs are side by side in q and k, as GLM-4's are; the loaders put
//! them half a head apart ([`super::interleaved_rows`]). The logits are multiplied by the
//! config's `logit_scale` ([`ModelConfig::granite`]'s divisor). Command-R+ LayerNorms each
//! head of q and k before it turns, with a gain for each head (`use_qk_norm`; its gains'
//! dimensions are side by side as q's and k's rows are). Command R7B and Command A
//! (`cohere2`) are this layer with three sliding layers to a global one that applies no RoPE
//! ([`ModelConfig::no_rope_layers`]).

use super::normed::{attention, gated_mlp, layer_norm};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", false)];
    ops.extend(attention(&n, "self_attn.o_proj", false));
    ops.extend(gated_mlp(&n));
    Layer { ops }
}
