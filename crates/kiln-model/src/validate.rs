//! Checks that a model's weights match its config: every tensor the forward pass needs is
//! present, has the expected HF shape and a supported type.

use crate::{ModelConfig, ModelError, ModelTensors, Weights};

/// (name, expected shape) of every tensor the forward pass reads.
pub fn expected_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    ModelTensors::for_config(cfg)
        .all()
        .into_iter()
        .map(|t| (t.name.clone(), t.shape.clone()))
        .collect()
}

pub(crate) fn check_weights(
    cfg: &ModelConfig,
    w: &Weights,
    source: &str,
) -> Result<(), ModelError> {
    for (name, shape) in expected_tensors(cfg) {
        let actual = w.shape(&name)?;
        if actual != shape {
            return Err(ModelError::corrupt(
                source,
                format!("tensor \"{name}\" has shape {actual:?}, the config implies {shape:?}"),
            ));
        }
        w.dtype(&name)?;
    }
    Ok(())
}
