//! The norms' epsilon of a config.json: the key each family writes it under, and
//! transformers' default for the architecture where the config leaves it out.

use serde_json::Value;

use crate::config::Architecture;

/// The epsilon of `architecture`'s norms in config `v`: `rms_norm_eps`, or the LayerNorms' by
/// their own names (Nemotron's, Cohere's and StableLM's).
pub(super) fn norm_eps(v: &Value, architecture: Architecture) -> f32 {
    let key = match architecture {
        Architecture::Nemotron => "norm_eps",
        Architecture::Starcoder2 => "norm_epsilon",
        _ if architecture.layer_norm() => "layer_norm_eps",
        _ => "rms_norm_eps",
    };
    (v.get(key).and_then(Value::as_f64)).unwrap_or(default_rms_norm_eps(architecture)) as f32
}

/// `rms_norm_eps` where a config leaves it out: transformers' default for the architecture.
fn default_rms_norm_eps(architecture: Architecture) -> f64 {
    match architecture {
        // (The LayerNorm families' epsilon.)
        a if a.layer_norm() => 1e-5,
        Architecture::Phi3
        | Architecture::Olmo2
        | Architecture::Exaone4
        | Architecture::Ernie45
        | Architecture::Arcee
        | Architecture::Olmoe
        | Architecture::Glm4Moe
        | Architecture::Ernie45Moe
        | Architecture::HunyuanMoe
        | Architecture::HunyuanDense
        | Architecture::Exaone => 1e-5,
        Architecture::Glm4 => 1.5625e-7,
        _ => 1e-6,
    }
}
