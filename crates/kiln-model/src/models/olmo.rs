//! OLMo (OLMo 1B and 7B; OLMo 1.7's clipping of q, k and v is refused): Llama's attention and gated MLP, one after the other, each
//! on a LayerNorm of the residual stream that has neither gain nor bias. Its files store no
//! tensor for those norms; the loader gives them gains of one
//! ([`unit_gains`]), so the LayerNorm launches are Cohere's.

use super::normed::{attention, gated_mlp, layer_norm};
use super::{Layer, ModelTensors, Names, Op};
use crate::{ModelConfig, ModelError, Weights};

/// Layer `i`.
pub(super) fn layer(cfg: &ModelConfig, i: usize) -> Layer {
    let n = Names::new(cfg, i);
    let mut ops = vec![layer_norm(&n, "input_layernorm", false)];
    ops.extend(attention(&n, "self_attn.o_proj", false));
    ops.push(layer_norm(&n, "post_attention_layernorm", false));
    ops.extend(gated_mlp(&n));
    Layer { ops }
}

/// Gains of one for the LayerNorms of a model whose LayerNorms have none
/// ([`crate::Architecture::norms_without_gain`]), held in memory: its files store none, and
/// one that holds such a tensor is not the model kiln would run (refused, naming it).
pub(crate) fn unit_gains(cfg: &ModelConfig, weights: &mut Weights) -> Result<(), ModelError> {
    if !cfg.architecture.norms_without_gain() {
        return Ok(());
    }
    let tensors = ModelTensors::for_config(cfg);
    let norms = (tensors.layers.iter().flat_map(|l| &l.ops))
        .filter_map(|op| match op {
            Op::LayerNorm { norm, .. } => Some(norm),
            _ => None,
        })
        .chain([&tensors.final_norm]);
    for norm in norms {
        if let Some(file) = weights.file_of(&norm.name) {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!(
                    "tensor \"{}\": {}'s LayerNorms have no gain",
                    weights.label(&norm.name),
                    cfg.architecture.gguf_name()
                ),
            });
        }
        weights.insert_constant(&norm.name, &norm.shape, 1.0);
    }
    Ok(())
}
