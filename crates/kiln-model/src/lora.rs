//! LoRA adapters as PEFT saves them: a folder with `adapter_config.json` and
//! `adapter_model.safetensors`, each adapted matrix `W` (out x in) given a pair `A` (r x in)
//! and `B` (out x r) whose product, scaled by `lora_alpha / r` (`lora_alpha / sqrt(r)` with
//! rsLoRA), is added to `W`'s: `y = W x + scale * B (A x)`. kiln applies them at run time,
//! per request, to the projections of the decoder layers; the base weights stay as they are.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::storage::{Storage, read_text};
use crate::{ModelConfig, ModelError, ModelTensors, Op, Weights};

/// One adapted matrix: `A` (rank x cols) and `B` (rows x rank), B already scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraPair {
    pub rank: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

/// A loaded adapter, checked against the model it adapts.
#[derive(Clone)]
pub struct LoraAdapter {
    /// The name requests select it by.
    pub name: String,
    pub path: PathBuf,
    /// The largest rank of its pairs.
    pub rank: usize,
    /// By the adapted tensor's name as the model names it (`model.layers.0.self_attn.q_proj.weight`).
    pub pairs: HashMap<String, LoraPair>,
    /// A hash of the adapter's values: prefix-cache keys of its requests include it, so no
    /// request reuses KV computed under another adapter (or none).
    pub fingerprint: u64,
}

const CONFIG: &str = "adapter_config.json";
const WEIGHTS: &str = "adapter_model.safetensors";

impl std::fmt::Debug for LoraAdapter {
    /// Its name, folder, rank and how many matrices it adapts, not its values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoraAdapter")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("rank", &self.rank)
            .field("matrices", &self.pairs.len())
            .finish()
    }
}

impl LoraAdapter {
    /// Reads the adapter in folder `path` and checks every pair against `config`'s layers.
    pub fn load(name: &str, path: &Path, config: &ModelConfig) -> Result<Self, ModelError> {
        let file = |f: &str| path.join(f).display().to_string();
        let unsupported = |f: &str, reason: String| ModelError::Unsupported {
            file: file(f),
            reason,
        };
        let cfg: Value = serde_json::from_str(&read_text(&path.join(CONFIG))?)
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
        let rslora = flag("use_rslora");

        let mut weights = Weights::new(file(WEIGHTS));
        let storage = Storage::map(&path.join(WEIGHTS))?;
        crate::safetensors::index_file(&mut weights, storage, &file(WEIGHTS))?;
        let targets = targets(config);
        let mut pairs = HashMap::new();
        let mut h = DefaultHasher::new();
        let mut names = weights.names();
        names.sort_unstable();
        for a_name in names.iter().filter(|n| n.contains(".lora_A.")) {
            let b_name = a_name.replace(".lora_A.", ".lora_B.");
            let base = base_name(a_name);
            let Some(&(rows, cols)) = targets.get(base.as_str()) else {
                return Err(unsupported(
                    WEIGHTS,
                    format!(
                        "\"{a_name}\" adapts {base}, which is not a projection of the model's decoder layers (kiln adapts those only)"
                    ),
                ));
            };
            let a_shape = weights.shape(a_name)?;
            let b_shape = weights.shape(&b_name)?;
            let rank = a_shape.first().copied().unwrap_or(0);
            if a_shape != [rank, cols] || b_shape != [rows, rank] || rank == 0 {
                return Err(ModelError::Mismatch {
                    file: file(WEIGHTS),
                    reason: format!(
                        "\"{a_name}\" is {a_shape:?} and its B {b_shape:?}; {base} is [{rows}, {cols}], so they must be [r, {cols}] and [{rows}, r]"
                    ),
                });
            }
            let scale = match rslora {
                true => alpha / (rank as f64).sqrt(),
                false => alpha / rank as f64,
            } as f32;
            let a = weights.read_f32(a_name)?;
            let b: Vec<f32> = weights
                .read_f32(&b_name)?
                .iter()
                .map(|v| v * scale)
                .collect();
            base.hash(&mut h);
            for v in a.iter().chain(&b) {
                v.to_bits().hash(&mut h);
            }
            pairs.insert(base, LoraPair { rank, a, b });
        }
        if let Some(other) = (weights.names().into_iter())
            .find(|n| !n.contains(".lora_A.") && !n.contains(".lora_B."))
        {
            return Err(unsupported(
                WEIGHTS,
                format!("tensor \"{other}\" is not a LoRA pair's (lora_A, lora_B)"),
            ));
        }
        if pairs.is_empty() {
            return Err(ModelError::corrupt(file(WEIGHTS), "no lora_A tensors"));
        }
        Ok(Self {
            name: name.to_string(),
            path: path.to_path_buf(),
            rank: pairs.values().map(|p| p.rank).max().unwrap_or(0),
            pairs,
            fingerprint: h.finish(),
        })
    }

    /// The prefix-cache salt of a request through this adapter with its own `salt`.
    pub fn salt(&self, salt: Option<&str>) -> String {
        format!("{}\u{1f}lora {:016x}", salt.unwrap_or(""), self.fingerprint)
    }
}

/// The matrices an adapter may adapt: every projection of the decoder layers, by name, with
/// their (rows, cols).
fn targets(config: &ModelConfig) -> HashMap<String, (usize, usize)> {
    let mut t = HashMap::new();
    for layer in ModelTensors::for_config(config).layers {
        for w in layer.ops.iter().flat_map(Op::matrices) {
            t.insert(w.name.clone(), (w.shape[0], w.shape[1]));
        }
    }
    t
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
