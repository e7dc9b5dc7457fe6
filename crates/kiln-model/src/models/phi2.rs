//! Phi-2 and Phi-1.5 (Microsoft's `phi`): one LayerNorm with a bias, which attention and a MLP
//! without a gate, `fc2(gelu(fc1 x))`, both read side by side (Command-R's order: attention's
//! output is added to the residual stream first, the MLP reads the norm taken before it).
//! Every product has a bias: q, k, v, the attention's output (`dense`), both of the MLP's and
//! the LM head's ([`super::ModelTensors`]); the final LayerNorm is `final_layernorm`. The
//! first 40% of each head turns (`partial_rotary_factor`).

use super::normed::{attention, layer_norm, ungated_mlp};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", true)];
    ops.extend(attention(&n, "self_attn.dense", true));
    ops.extend(ungated_mlp(&n, ("mlp.fc1", "mlp.fc2"), true));
    Layer { ops }
}
