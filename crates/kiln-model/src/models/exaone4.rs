//! EXAONE 4: OLMo 2's layer (no norms before the sub-layers, norms after them) with Qwen3's
//! per-head q/k norms. What else sets it apart is in [`ModelConfig`]: with a window, three
//! sliding layers to a global one, and the global layers apply no rotary embedding.

use super::olmo2::post_normed;
use super::{Layer, Names};
use crate::ModelConfig;

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    post_normed(&n, n.qk_norm())
}
