//! vLLM's `--generation-config` and `--override-generation-config` for `kiln serve`: where the
//! requests' sampling defaults come from (the model's own, none, or another folder's
//! `generation_config.json`), and values set over them.

use std::path::Path;

use kiln_model::GenerationDefaults;
use serde_json::Value;

/// The defaults `source` names: `auto` keeps the model's (`model`), `vllm` drops them (kiln's
/// own then apply), anything else is a folder whose `generation_config.json` is read.
pub fn defaults(source: &str, model: GenerationDefaults) -> anyhow::Result<GenerationDefaults> {
    Ok(match source {
        "auto" => model,
        "vllm" => GenerationDefaults::default(),
        folder => {
            let path = Path::new(folder).join("generation_config.json");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("--generation-config: {}: {e}", path.display()))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("--generation-config: {}: {e}", path.display()))?;
            GenerationDefaults::from_hf_json(&v)
        }
    })
}

/// `defaults` with the values of `json` (an object of `temperature`, `top_p`, `top_k`,
/// `min_p`, `repetition_penalty`) set over them; any other key, or a value of the wrong type,
/// is an error naming it.
pub fn overridden(mut d: GenerationDefaults, json: &str) -> anyhow::Result<GenerationDefaults> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| anyhow::anyhow!("--override-generation-config: {e}"))?;
    let obj = v
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("--override-generation-config: a JSON object"))?;
    for (k, v) in obj {
        let bad =
            || anyhow::anyhow!("--override-generation-config: `{k}` must be a number, not {v}");
        let float = || v.as_f64().map(|x| x as f32).ok_or_else(bad);
        match k.as_str() {
            "temperature" => d.temperature = Some(float()?),
            "top_p" => d.top_p = Some(float()?),
            "min_p" => d.min_p = Some(float()?),
            "repetition_penalty" => d.repetition_penalty = Some(float()?),
            "top_k" => {
                // vLLM's -1 is "all tokens", kiln's 0.
                let k = v.as_i64().ok_or_else(bad)?;
                d.top_k = Some(if k < 0 { 0 } else { k as u32 });
            }
            other => anyhow::bail!(
                "--override-generation-config: `{other}` is not a default kiln takes \
                 (temperature, top_p, top_k, min_p, repetition_penalty)"
            ),
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_and_overrides() {
        let model = GenerationDefaults {
            temperature: Some(0.6),
            top_p: Some(0.9),
            ..Default::default()
        };
        assert_eq!(defaults("auto", model).unwrap(), model);
        assert_eq!(
            defaults("vllm", model).unwrap(),
            GenerationDefaults::default()
        );
        let dir = std::env::temp_dir().join(format!("kiln-gencfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("generation_config.json"),
            r#"{"do_sample": true, "temperature": 0.3, "top_k": 20}"#,
        )
        .unwrap();
        let read = defaults(dir.to_str().unwrap(), model).unwrap();
        assert_eq!(
            (read.temperature, read.top_k, read.top_p),
            (Some(0.3), Some(20), None)
        );
        let err = defaults("/nonexistent/kiln", model)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/kiln/generation_config.json"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).ok();

        let o = overridden(model, r#"{"temperature": 0, "top_k": -1, "min_p": 0.05}"#).unwrap();
        assert_eq!(
            (o.temperature, o.top_k, o.min_p, o.top_p),
            (Some(0.0), Some(0), Some(0.05), Some(0.9))
        );
        for bad in [
            r#"{"max_new_tokens": 5}"#,
            r#"{"temperature": "hot"}"#,
            "[1]",
            "{",
        ] {
            assert!(overridden(model, bad).is_err(), "{bad}");
        }
        let err = overridden(model, r#"{"max_new_tokens": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`max_new_tokens`"), "{err}");
    }
}
