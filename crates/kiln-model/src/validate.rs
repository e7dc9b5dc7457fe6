//! Checks that a model's weights match its config: every tensor the forward pass needs is
//! present, has the expected HF shape and a supported type.

use std::collections::HashSet;

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
                format!(
                    "tensor \"{}\" has shape {actual:?}, the config implies {shape:?}",
                    w.label(&name)
                ),
            ));
        }
        w.dtype(&name)?;
    }
    // A tensor the forward pass would not read (a bias on o_proj or the MLP, a norm of another
    // variant) means a model kiln would run wrong: refused by name, never left out silently.
    let expected: HashSet<String> = expected_tensors(cfg).into_iter().map(|(n, _)| n).collect();
    if let Some(name) =
        (w.names().into_iter()).find(|n| !expected.contains(*n) && !read_elsewhere(n, cfg))
    {
        return Err(ModelError::Unsupported {
            file: w.file_of(name).unwrap_or(source).into(),
            reason: format!(
                "tensor \"{}\", which kiln's {} forward pass does not read",
                w.label(name),
                cfg.architecture.gguf_name()
            ),
        });
    }
    Ok(())
}

/// Tensors besides the layers' that a loader reads or that change nothing: RoPE's factor
/// tensors (read into the config), stored inverse frequencies (computed again), an output
/// matrix that a tied model ignores, as transformers ignores it, older GPT-NeoX, GPT-2,
/// StarCoder and GPT-J checkpoints' causal masks, and GLM-4.5's and ERNIE 4.5's multi-token-prediction
/// layers (draft heads kiln does not run).
fn read_elsewhere(name: &str, cfg: &ModelConfig) -> bool {
    // (llama.cpp's own names for their parts, `blk.N.nextn.*`, stay unmapped.)
    let after_last = (name.strip_prefix("model.layers."))
        .or_else(|| name.strip_prefix("blk."))
        .and_then(|rest| rest.split_once('.')?.0.parse::<usize>().ok())
        .is_some_and(|i| i >= cfg.num_layers);
    (after_last && cfg.architecture == crate::Architecture::Glm4Moe)
        || (name.starts_with("model.mtp_") && cfg.architecture == crate::Architecture::Ernie45Moe)
        || matches!(
            name,
            "rope_freqs.weight" | "rope_factors_long.weight" | "rope_factors_short.weight"
        )
        || name.ends_with("rotary_emb.inv_freq")
        || (cfg.architecture == crate::Architecture::GptNeox
            && crate::models::gpt_neox::is_stored_buffer(name))
        || ((cfg.architecture.learned_positions() || cfg.architecture == crate::Architecture::GptJ)
            && crate::models::gpt2::is_stored_buffer(name))
        || (name == "lm_head.weight" && cfg.tie_word_embeddings)
}
