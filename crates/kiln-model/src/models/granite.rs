//! Granite: Llama's layer. What sets it apart is in [`ModelConfig::granite`]: the embeddings
//! multiplied by one scalar, the attention scores scaled by another (in place of
//! `1/sqrt(head_dim)`), each sub-layer's output multiplied by a third as it joins the residual
//! stream, and the logits divided by a fourth.

use super::{Layer, llama};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    llama::layer(cfg, i)
}
