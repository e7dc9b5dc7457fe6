//! SmolLM3: Llama's layer. What sets it apart is in [`ModelConfig`]: every fourth layer
//! applies no rotary embedding (`no_rope_layers`; its queries and keys carry no position, the
//! causal mask alone orders them), which the rotary step runs as a rotation by nothing.

use super::{Layer, llama};
use crate::ModelConfig;

pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    llama::layer(cfg, i)
}
