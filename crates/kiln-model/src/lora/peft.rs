//! PEFT's adapter folders: `adapter_config.json` (rank, `lora_alpha`, rsLoRA, what was
//! trained) and `adapter_model.safetensors`, whose pairs are named after the model's modules
//! (`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`).

use std::path::Path;

use serde_json::Value;

use super::{Scale, Source};
use crate::storage::{Storage, read_text};
use crate::{ModelError, Weights};

pub(super) const CONFIG: &str = "adapter_config.json";
pub(super) const WEIGHTS: &str = "adapter_model.safetensors";

/// Reads the adapter folder `path`, refusing what kiln does not apply.
pub(super) fn read(path: &Path) -> Result<Source, ModelError> {
    let config = read_text(&path.join(CONFIG))?;
    let weights = Storage::map(&path.join(WEIGHTS))?;
    from_files(&config, weights, |f| path.join(f).display().to_string())
}

/// Reads an adapter from its config's text and its weights file's bytes; `file(name)` names
/// the folder's file `name` in errors.
pub(super) fn from_files(
    config: &str,
    weights: Storage,
    file: impl Fn(&str) -> String,
) -> Result<Source, ModelError> {
    let unsupported = |f: &str, reason: String| ModelError::Unsupported {
        file: file(f),
        reason,
    };
    let cfg: Value = serde_json::from_str(config)
        .map_err(|e| ModelError::corrupt(file(CONFIG), e.to_string()))?;
    if let Some(t) = cfg.get("peft_type").and_then(Value::as_str)
        && t != "LORA"
    {
        return Err(unsupported(
            CONFIG,
            format!("peft_type {t}: only LORA adapters are applied"),
        ));
    }
    let flag = |k: &str| cfg.get(k).and_then(Value::as_bool).unwrap_or(false);
    for (key, what) in [
        ("use_dora", "DoRA (use_dora)"),
        ("fan_in_fan_out", "transposed (fan_in_fan_out) weights"),
    ] {
        if flag(key) {
            return Err(unsupported(CONFIG, format!("{what} is not supported")));
        }
    }
    if let Some(b) = cfg.get("bias").and_then(Value::as_str)
        && b != "none"
    {
        return Err(unsupported(
            CONFIG,
            format!("bias \"{b}\": adapters with biases are not supported"),
        ));
    }
    let nonempty = |k: &str| match cfg.get(k) {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    for (key, what) in [
        ("modules_to_save", "modules saved whole (modules_to_save)"),
        ("alpha_pattern", "per-module alphas (alpha_pattern)"),
    ] {
        if nonempty(key) {
            return Err(unsupported(CONFIG, format!("{what} are not supported")));
        }
    }
    let alpha = (cfg.get("lora_alpha").and_then(Value::as_f64))
        .ok_or_else(|| ModelError::corrupt(file(CONFIG), "no lora_alpha"))?;
    let scale = match flag("use_rslora") {
        true => Scale::RsLora(alpha),
        false => Scale::Alpha(alpha),
    };

    let storage = weights;
    let mut weights = Weights::new(file(WEIGHTS));
    crate::safetensors::index_file(&mut weights, storage, &file(WEIGHTS))?;
    let names = weights.names();
    if let Some(other) = (names.iter()).find(|n| !n.contains(".lora_A.") && !n.contains(".lora_B."))
    {
        return Err(unsupported(
            WEIGHTS,
            format!("tensor \"{other}\" is not a LoRA pair's (lora_A, lora_B)"),
        ));
    }
    let pairs = (names.iter().filter(|n| n.contains(".lora_A.")))
        .map(|a| {
            (
                base_name(a),
                a.to_string(),
                a.replace(".lora_A.", ".lora_B."),
            )
        })
        .collect();
    Ok(Source {
        file: file(WEIGHTS),
        weights,
        pairs,
        scale,
    })
}

/// `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight` (or with the adapter's
/// name before `.weight`) to `model.layers.0.self_attn.q_proj.weight`.
fn base_name(a_name: &str) -> String {
    let module = a_name.split(".lora_A.").next().unwrap_or(a_name);
    let module = module.strip_prefix("base_model.model.").unwrap_or(module);
    match module.starts_with("model.") {
        true => format!("{module}.weight"),
        false => format!("model.{module}.weight"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peft_names_map_to_the_models() {
        for n in [
            "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight",
            "base_model.model.layers.3.self_attn.q_proj.lora_A.weight",
            "base_model.model.model.layers.3.self_attn.q_proj.lora_A.default.weight",
        ] {
            assert_eq!(
                base_name(n),
                "model.layers.3.self_attn.q_proj.weight",
                "{n}"
            );
        }
    }
}
