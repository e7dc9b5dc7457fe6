//! A config.json's partial rotary embedding: how many dimensions of each head turn, from
//! `partial_rotary_factor` or the family's default share, on the families whose code turns
//! only part of a head.

use serde_json::Value;

use crate::ModelError;
use crate::config::Architecture;

/// The dimensions of a head of `head_dim` that turn, where fewer than all of them do.
///
/// The code of the families [`Architecture::partial_rotary`] names turns the first
/// `factor * head_dim` dimensions of a head (Phi-4-mini's; GLM-4's, Nemotron's and Phi-2's
/// half unless the config says; StableLM's and GPT-NeoX's quarter; GPT-J's `rotary_dim`,
/// made a factor when its keys are read); the other families' turn all of them.
/// Transformers 5 also writes the factor into `rope_parameters`.
pub(super) fn partial_rotary_dim(
    v: &Value,
    architecture: Architecture,
    model_type: &str,
    head_dim: usize,
    file: &str,
) -> Result<Option<usize>, ModelError> {
    let partial = (v.get("partial_rotary_factor").and_then(Value::as_f64))
        .or_else(|| {
            v.pointer("/rope_parameters/partial_rotary_factor")
                .and_then(Value::as_f64)
        })
        .or(matches!(architecture, Architecture::Glm4 | Architecture::Glm4Moe).then_some(0.5))
        .or((architecture == Architecture::StableLm).then_some(0.25))
        .or((architecture == Architecture::Nemotron).then_some(0.5))
        .or((architecture == Architecture::Phi2).then_some(0.5))
        .or((architecture == Architecture::GptNeox).then_some(0.25));
    match partial.filter(|&f| f != 1.0) {
        None => Ok(None),
        Some(f) if architecture.partial_rotary() => {
            let dim = (f * head_dim as f64).round() as usize;
            if (dim as f64 - f * head_dim as f64).abs() > 1e-6 {
                return Err(ModelError::config(
                    file,
                    format!(
                        "partial_rotary_factor {f} of head_dim {head_dim} is not a whole number of dimensions"
                    ),
                ));
            }
            Ok(Some(dim))
        }
        Some(f) => Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("partial rotary embedding (partial_rotary_factor {f}) on {model_type}"),
        }),
    }
}
