//! `kiln serve --lora-modules`: vLLM's two forms of an adapter (`NAME=PATH`, or JSON with
//! the model it was made for), read and checked against the served model and its names.

use std::sync::Arc;

use kiln_model::{LoraAdapter, ModelConfig};

/// One `--lora-modules` adapter.
#[derive(Clone, Debug, PartialEq)]
pub struct LoraModule {
    name: String,
    path: std::path::PathBuf,
    /// The model it was trained for (vLLM's JSON form), checked against the served one.
    base_model_name: Option<String>,
}

/// `NAME=PATH`, or `{"name": ..., "path": ..., "base_model_name": ...}`.
pub fn parse(s: &str) -> Result<LoraModule, String> {
    if !s.trim_start().starts_with('{') {
        return match s.split_once('=') {
            Some((name, path)) if !name.is_empty() && !path.is_empty() => Ok(LoraModule {
                name: name.to_string(),
                path: path.into(),
                base_model_name: None,
            }),
            _ => Err(format!(
                "`{s}` is not NAME=PATH or {{\"name\": ..., \"path\": ...}}"
            )),
        };
    }
    let v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(s).map_err(|e| format!("`{s}`: {e}"))?;
    if let Some(k) = v
        .keys()
        .find(|k| !["name", "path", "base_model_name"].contains(&k.as_str()))
    {
        return Err(format!(
            "`{s}`: unknown field `{k}` (name, path, base_model_name)"
        ));
    }
    let text = |k: &str| match v.get(k) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(t)) if !t.is_empty() => Ok(Some(t.clone())),
        Some(_) => Err(format!("`{s}`: {k} must be a non-empty string")),
    };
    let need = |k: &str| text(k)?.ok_or_else(|| format!("`{s}`: {k} is missing"));
    Ok(LoraModule {
        name: need("name")?,
        path: need("path")?.into(),
        base_model_name: text("base_model_name")?,
    })
}

/// Reads `modules` for the model of `config`, served under `served` (its names and the model
/// argument): each name new, each base model (where given) one of `served`.
pub fn load(
    modules: &[LoraModule],
    served: &[&String],
    config: &ModelConfig,
) -> anyhow::Result<Vec<Arc<LoraAdapter>>> {
    let mut lora: Vec<Arc<LoraAdapter>> = Vec::new();
    for m in modules {
        let (adapter, dir) = (&m.name, &m.path);
        anyhow::ensure!(
            !served.contains(&adapter) && !lora.iter().any(|l| l.name == *adapter),
            "--lora-modules: the name `{adapter}` is taken (by the served model or another adapter)"
        );
        if let Some(base) = &m.base_model_name {
            anyhow::ensure!(
                served.contains(&base),
                "--lora-modules: `{adapter}`'s base_model_name `{base}` is not the served model ({})",
                served
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let l = LoraAdapter::load(adapter, dir, config)?;
        tracing::info!(
            "LoRA adapter `{adapter}` from {} (rank {}, {} matrices)",
            dir.display(),
            l.rank,
            l.ranks.len()
        );
        lora.push(Arc::new(l));
    }
    Ok(lora)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lora_modules_read_both_of_vllms_forms() {
        let plain = parse("sql=/a/b").unwrap();
        assert_eq!(
            (plain.name.as_str(), plain.path.to_str()),
            ("sql", Some("/a/b"))
        );
        let json = parse(r#"{"name": "sql", "path": "/a/b", "base_model_name": "m"}"#).unwrap();
        assert_eq!(
            json,
            LoraModule {
                base_model_name: Some("m".into()),
                ..plain
            }
        );
        for (bad, why) in [
            ("sql", "NAME=PATH"),
            (r#"{"name": "sql"}"#, "path is missing"),
            (
                r#"{"name": "sql", "path": "/a", "scale": 2}"#,
                "unknown field `scale`",
            ),
            (r#"{"name": 3, "path": "/a"}"#, "name must be"),
            ("{nope", "`{nope`"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
