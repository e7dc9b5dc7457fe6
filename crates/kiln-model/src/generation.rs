//! The sampling settings a model's authors ship with it: Hugging Face's
//! `generation_config.json` or GGUF's `general.sampling.*` keys. Front ends use them as the
//! defaults of every request that leaves a knob unset (as vLLM does with `--generation-config
//! auto`); a knob the model does not set keeps kiln's own default.

use serde_json::Value;

/// Each field is `None` where the model says nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenerationDefaults {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// 0 means "all tokens", as in both file formats.
    pub top_k: Option<u32>,
    pub min_p: Option<f32>,
    pub repetition_penalty: Option<f32>,
}

impl GenerationDefaults {
    /// From a parsed `generation_config.json`. `do_sample: false` means greedy decoding, so it
    /// sets temperature 0 whatever `temperature` says (transformers ignores the other knobs
    /// then too).
    pub fn from_hf_json(v: &Value) -> Self {
        let f = |key: &str| v.get(key).and_then(Value::as_f64).map(|x| x as f32);
        let greedy = v.get("do_sample").and_then(Value::as_bool) == Some(false);
        GenerationDefaults {
            temperature: if greedy { Some(0.0) } else { f("temperature") },
            top_p: f("top_p"),
            top_k: v.get("top_k").and_then(Value::as_u64).map(|k| k as u32),
            min_p: f("min_p"),
            repetition_penalty: f("repetition_penalty"),
        }
    }

    /// From GGUF metadata, read through `float(key)` (any numeric type as f64).
    pub fn from_gguf(float: impl Fn(&str) -> Option<f64>) -> Self {
        let f = |key: &str| float(&format!("general.sampling.{key}")).map(|x| x as f32);
        GenerationDefaults {
            temperature: f("temp"),
            top_p: f("top_p"),
            top_k: f("top_k").map(|k| k.max(0.0) as u32),
            min_p: f("min_p"),
            repetition_penalty: f("penalty_repeat"),
        }
    }

    /// Whether the model sets anything.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The settings as `name=value` pairs, for `kiln info` and logs.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut put = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push(format!("{name}={v}"));
            }
        };
        put("temperature", self.temperature.map(|x| x.to_string()));
        put("top_p", self.top_p.map(|x| x.to_string()));
        put("top_k", self.top_k.map(|x| x.to_string()));
        put("min_p", self.min_p.map(|x| x.to_string()));
        put(
            "repetition_penalty",
            self.repetition_penalty.map(|x| x.to_string()),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_hf_generation_config() {
        let v: Value = serde_json::from_str(
            r#"{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "eos_token_id": 2}"#,
        )
        .unwrap();
        let d = GenerationDefaults::from_hf_json(&v);
        assert_eq!(d.temperature, Some(0.6));
        assert_eq!(d.top_p, Some(0.95));
        assert_eq!(d.top_k, Some(20));
        assert_eq!(d.min_p, None);
        let greedy: Value =
            serde_json::from_str(r#"{"do_sample": false, "temperature": 0.6}"#).unwrap();
        assert_eq!(
            GenerationDefaults::from_hf_json(&greedy).temperature,
            Some(0.0)
        );
        assert!(
            GenerationDefaults::from_hf_json(&serde_json::json!({"bos_token_id": 1})).is_empty()
        );
    }

    #[test]
    fn reads_gguf_keys() {
        let d = GenerationDefaults::from_gguf(|k| match k {
            "general.sampling.temp" => Some(0.7),
            "general.sampling.top_k" => Some(40.0),
            "general.sampling.penalty_repeat" => Some(1.1),
            _ => None,
        });
        assert_eq!(d.temperature, Some(0.7));
        assert_eq!(d.top_k, Some(40));
        assert_eq!(d.repetition_penalty, Some(1.1));
        assert_eq!(d.top_p, None);
        assert_eq!(
            d.describe(),
            ["temperature=0.7", "top_k=40", "repetition_penalty=1.1"]
        );
    }
}
