//! MiniCPM (MiniCPM 1B and 2B, MiniCPM4): Granite's layer and multipliers under other names.
//! Its config gives `scale_emb`, by which the embeddings are multiplied; `scale_depth`, from
//! which each sub-layer's output is multiplied by `scale_depth / sqrt(num_layers)` on its way
//! into the residual stream; and `dim_model_base`, by whose ratio `hidden_size /
//! dim_model_base` the logits are divided. Its attention scale is the usual `1/sqrt(head_dim)`.
//! [`ModelConfig::granite`] holds the four as they are applied.

use super::{Layer, granite};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    granite::layer(cfg, i)
}
