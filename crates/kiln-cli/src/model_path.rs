//! Where `--model` points: a folder, a GGUF file, a Hugging Face repo id, or (by default) the
//! default model fetched by `scripts/fetch-model.sh`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_model::Model;

pub const DEFAULT_MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// Resolves `arg` to a local path, downloading a Hugging Face repo id into the usual cache.
pub fn resolve(arg: Option<&str>) -> anyhow::Result<PathBuf> {
    let Some(arg) = arg else {
        let path = std::env::var_os("KILN_MODEL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_MODEL));
        if !path.exists() {
            bail!(
                "the default model {} is not present; fetch it with `scripts/fetch-model.sh` (or pass --model PATH)",
                path.display()
            );
        }
        return Ok(path);
    };
    let path = Path::new(arg);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    let looks_like_repo =
        arg.split('/').count() == 2 && !arg.ends_with(".gguf") && !arg.starts_with('.');
    if !looks_like_repo {
        bail!("model {arg}: no such file or folder");
    }
    download(arg)
}

/// Fetches the files of a Hugging Face model repo into the Hugging Face cache.
fn download(repo_id: &str) -> anyhow::Result<PathBuf> {
    let api = hf_hub::api::sync::Api::new().context("opening the Hugging Face cache")?;
    let repo = api.model(repo_id.to_string());
    let mut dir = None;
    // (A SentencePiece `tokenizer.model` stands in for a missing `tokenizer.json`; what kept
    // each from coming is said where neither came.)
    let mut tokenizer = None;
    let mut tokenizer_errors = Vec::new();
    for file in [
        "config.json",
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "chat_template.jinja",
        "chat_template.json",
        "generation_config.json",
    ] {
        if file == "tokenizer.model" && tokenizer.is_some() {
            continue;
        }
        match repo.get(file) {
            Ok(p) => {
                dir = p.parent().map(Path::to_path_buf);
                if file.starts_with("tokenizer.") {
                    tokenizer = Some(file);
                }
            }
            Err(e) if file == "config.json" => {
                bail!("model {repo_id}: could not fetch {file} from the Hugging Face hub: {e}")
            }
            Err(e) if file.starts_with("tokenizer.") => {
                tokenizer_errors.push(format!("{file}: {e}"))
            }
            Err(_) => {}
        }
    }
    if tokenizer.is_none() {
        bail!(
            "model {repo_id}: could fetch neither tokenizer.json nor tokenizer.model from the \
             Hugging Face hub ({})",
            tokenizer_errors.join("; ")
        );
    }
    if repo.get("model.safetensors").is_err() {
        let index = repo
            .get("model.safetensors.index.json")
            .with_context(|| format!("model {repo_id}: no model.safetensors"))?;
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&index)?)?;
        let mut shards: Vec<&str> = json["weight_map"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(|v| v.as_str())
            .collect();
        shards.sort();
        shards.dedup();
        for shard in shards {
            repo.get(shard)
                .with_context(|| format!("model {repo_id}: fetching {shard}"))?;
        }
    }
    dir.context("empty repository")
}

/// Loads the model with a progress line.
pub fn load(arg: Option<&str>) -> anyhow::Result<Model> {
    let path = resolve(arg)?;
    let spinner = ProgressBar::new_spinner().with_message(format!("reading {}", path.display()));
    let model = Model::load(&path)?;
    spinner.finish_and_clear();
    Ok(model)
}

/// [`load`], with the chat template `template` where given: a file's path, or the template
/// itself where no such file exists (vLLM's `--chat-template`).
pub fn load_with_template(arg: Option<&str>, template: Option<&str>) -> anyhow::Result<Model> {
    let mut model = load(arg)?;
    if let Some(t) = template {
        let (source, origin) = match std::fs::read_to_string(t) {
            Ok(source) => (source, t),
            Err(_) if Path::new(t).exists() => bail!("--chat-template {t}: cannot be read"),
            Err(_) => (t.to_string(), "--chat-template"),
        };
        model.set_chat_template(&source, origin)?;
    }
    Ok(model)
}

/// A progress bar for uploading weights, fed by the engine's `progress(done, total)`.
fn upload_bar() -> ProgressBar {
    let bar = ProgressBar::new(1);
    bar.set_style(
        ProgressStyle::with_template("uploading weights {bar:30} {pos}/{len} layers {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Builds the engine, showing the weights' upload as a progress bar.
pub fn build_engine(
    ctx: &kiln_gpu::GpuContext,
    config: &kiln_model::ModelConfig,
    weights: &kiln_model::Weights,
    ec: kiln_engine::EngineConfig,
) -> anyhow::Result<kiln_engine::Engine> {
    let bar = upload_bar();
    let engine = kiln_engine::Engine::new(ctx, config, weights, ec, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    Ok(engine)
}
