//! llama.cpp's LoRA adapter files: a GGUF file whose `general.type` is `adapter` and
//! `adapter.type` is `lora`, made for one architecture (`general.architecture`), with
//! `adapter.lora.alpha` and a pair of tensors per adapted matrix named after the model's GGUF
//! tensor (`blk.0.attn_q.weight.lora_a`, `.lora_b`), in any type GGUF models use. A pair's
//! shapes are PEFT's (A is rank x in, B out x rank), and the scale is `alpha / rank`, or 1 when
//! alpha is 0 or absent. llama.cpp's converter gives a Llama adapter's Q and K pairs the same
//! row interleaving as the model's Q and K (on B, the rows of the product), which is undone
//! here as it is for models.

use super::{Scale, Source};
use crate::gguf::config::Meta;
use crate::gguf::names::Interleaved;
use crate::gguf::{index_tensors, names, reader};
use crate::storage::Storage;
use crate::{ModelConfig, ModelError};

/// Reads the adapter file held in `storage` (`file` names it in errors) for a model of
/// `config`.
pub(super) fn read(
    storage: Storage,
    file: String,
    config: &ModelConfig,
) -> Result<Source, ModelError> {
    let header = reader::parse_header(storage.bytes(), &file)?;
    let meta = Meta {
        map: &header.metadata,
        file: &file,
    };
    let unsupported = |reason: String| ModelError::Unsupported {
        file: file.clone(),
        reason,
    };
    match meta.str("general.type") {
        Some("adapter") => {}
        other => {
            return Err(unsupported(format!(
                "general.type is {other:?}, not \"adapter\": not a LoRA adapter's file"
            )));
        }
    }
    match meta.str("adapter.type") {
        Some("lora") => {}
        other => {
            return Err(unsupported(format!(
                "adapter.type is {other:?}: only LoRA adapters (\"lora\") are applied"
            )));
        }
    }
    if meta.get("adapter.alora.invocation_tokens").is_some() {
        return Err(unsupported(
            "an activated LoRA (adapter.alora.invocation_tokens) is not supported".into(),
        ));
    }
    let arch = config.architecture;
    let theirs = meta.str("general.architecture").unwrap_or("<missing>");
    if theirs != arch.gguf_name() {
        return Err(ModelError::Mismatch {
            file: file.clone(),
            reason: format!(
                "the adapter is for the {theirs} architecture, the model is {}",
                arch.gguf_name()
            ),
        });
    }
    let scale = match meta.f64("adapter.lora.alpha").unwrap_or(0.0) {
        0.0 => Scale::One,
        alpha => Scale::Alpha(alpha),
    };
    let heads = (config.num_heads, config.num_kv_heads);
    let weights = index_tensors(&header, storage, &file, |name| {
        let b_of = name.strip_suffix(".lora_b");
        let interleaved = match (arch.gguf_permutes_qk(), b_of.and_then(names::permuted_kind)) {
            (true, Some(true)) => Some(Interleaved::whole(heads.0)),
            (true, Some(false)) => Some(Interleaved::whole(heads.1)),
            _ => None,
        };
        (name.to_string(), interleaved)
    })?;
    let names = weights.names();
    if let Some(other) = (names.iter()).find(|n| !n.ends_with(".lora_a") && !n.ends_with(".lora_b"))
    {
        return Err(unsupported(format!(
            "tensor \"{other}\" is not a LoRA pair's (.lora_a, .lora_b)"
        )));
    }
    let pairs = (names.iter().filter_map(|n| n.strip_suffix(".lora_a")))
        .map(|t| {
            let hf = names::gguf_to_hf_name(t, arch);
            (hf, format!("{t}.lora_a"), format!("{t}.lora_b"))
        })
        .collect();
    Ok(Source {
        file,
        weights,
        pairs,
        scale,
    })
}
