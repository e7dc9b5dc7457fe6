//! Arcee (AFM-4.5B): Llama's attention, and a MLP without a gate: the normalized residual
//! stream times `up_proj`, squared where positive and zero elsewhere (`relu(x)^2`, the
//! config's `hidden_act` "relu2"), times `down_proj` into the residual stream.

use super::Buf::{Act, Residual};
use super::Op::{Activation, NormedProject, Project};
use super::llama::attention;
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let (h, ff) = (cfg.hidden_size, cfg.intermediate_size);
    let mut ops = attention(&n, n.qkv(), None, Residual).to_vec();
    ops.extend([
        NormedProject {
            src: Residual,
            norm: Some(n.norm("post_attention_layernorm")),
            weights: vec![n.tensor("mlp.up_proj.weight", &[ff, h])],
            bias: None,
            dst: Act,
        },
        Activation,
        Project {
            src: Act,
            weight: n.tensor("mlp.down_proj.weight", &[h, ff]),
            bias: None,
            dst: Residual,
        },
    ]);
    Layer { ops }
}
