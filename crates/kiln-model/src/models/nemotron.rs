//! Nemotron (Nemotron-4 Minitron 4B and 8B, Nemotron-Mini 4B): StableLM's attention behind a
//! LayerNorm with a bias, then a LayerNorm and a MLP without a gate, `down(relu(up x)^2)`
//! (Arcee's). Its LayerNorms' gains are stored minus one in Hugging Face files
//! ([`ModelConfig`]'s gain offset; llama.cpp's converter adds the one), and half of each head
//! turns unless the config gives another `partial_rotary_factor`.

use super::Buf::{Act, Normed, Residual};
use super::Op::{Activation, NormedProject, Project};
use super::stablelm::{attention, layer_norm};
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let (h, ff) = (cfg.hidden_size, cfg.intermediate_size);
    let mut ops = attention(&n).to_vec();
    ops.extend([
        layer_norm(&n, "post_attention_layernorm"),
        NormedProject {
            src: Normed,
            norm: None,
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
