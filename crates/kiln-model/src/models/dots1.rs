//! dots.llm1 (rednote's 142B-A14B): Qwen3's attention (per-head q/k norms, no biases) and
//! GLM-4.5's mixture of experts (sigmoid scores with each expert's bias in the choice, shared
//! experts, the first `first_k_dense_replace` layers dense).

use super::Buf::Residual;
use super::llama::attention;
use super::{Layer, Names, glm4_moe};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = attention(&n, n.qkv(), Some(n.qk_norm()), Residual).to_vec();
    ops.extend(glm4_moe::mlp_or_experts(&n));
    Layer { ops }
}
