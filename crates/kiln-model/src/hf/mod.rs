//! Hugging Face model folders (config.json, *.safetensors, tokenizer.json or SentencePiece's
//! tokenizer.model, tokenizer_config.json, chat_template.jinja, generation_config.json), read
//! from disk (safetensors memory-mapped) or from in-memory files; the tokenizer and chat
//! template in [`tokenizer`].

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use serde_json::Value;

mod tokenizer;

use tokenizer::{read_tokenizer, token_string};

use crate::hf_config::multimodal::VISION;
use crate::hf_config::token_id_list;
use crate::storage::{Storage, read_text};
use crate::{
    Architecture, ChatTemplate, ModelConfig, ModelError, Tokenizer, Weights, models, safetensors,
};

pub(crate) struct Loaded {
    pub config: ModelConfig,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
}

/// Where the folder's files come from.
pub(crate) enum Files<'a> {
    Dir(&'a Path),
    Mem(HashMap<String, Vec<u8>>),
}

impl Files<'_> {
    fn label(&self, name: &str) -> String {
        match self {
            Files::Dir(d) => d.join(name).display().to_string(),
            Files::Mem(_) => name.to_string(),
        }
    }

    fn exists(&self, name: &str) -> bool {
        match self {
            Files::Dir(d) => d.join(name).is_file(),
            Files::Mem(m) => m.contains_key(name),
        }
    }

    fn missing(&self, name: &str) -> ModelError {
        ModelError::MissingFile {
            path: self.label(name).into(),
            reason: "required file is not present".into(),
        }
    }

    fn text(&self, name: &str) -> Result<String, ModelError> {
        match self {
            Files::Dir(d) => read_text(&d.join(name)),
            Files::Mem(m) => {
                let b = m.get(name).ok_or_else(|| self.missing(name))?;
                String::from_utf8(b.clone())
                    .map_err(|_| ModelError::corrupt(name, "not valid UTF-8"))
            }
        }
    }

    fn optional_json(&self, name: &str) -> Result<Option<Value>, ModelError> {
        if !self.exists(name) {
            return Ok(None);
        }
        let text = self.text(name)?;
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| ModelError::corrupt(self.label(name), format!("invalid JSON: {e}")))
    }

    fn bytes(&self, name: &str) -> Result<Vec<u8>, ModelError> {
        match self {
            Files::Dir(d) => std::fs::read(d.join(name)).map_err(|e| ModelError::MissingFile {
                path: self.label(name).into(),
                reason: e.to_string(),
            }),
            Files::Mem(m) => m.get(name).cloned().ok_or_else(|| self.missing(name)),
        }
    }

    /// Maps (or takes ownership of) a weight file.
    fn storage(&mut self, name: &str) -> Result<Storage, ModelError> {
        match self {
            Files::Dir(d) => Storage::map(&d.join(name)),
            Files::Mem(m) => {
                m.remove(name)
                    .map(Storage::Owned)
                    .ok_or_else(|| ModelError::MissingFile {
                        path: name.into(),
                        reason: "required file is not present".into(),
                    })
            }
        }
    }
}

/// A multimodal folder's language model (Gemma 3's, Mistral 3's, Qwen-VL's) under the text
/// model's names: `language_model.model.*` (the released checkpoints) or
/// `model.language_model.*` (transformers 5's) as `model.*`, `language_model.lm_head.*` as
/// `lm_head.*`; the vision tower and its projector left out, as kiln runs text alone.
fn language_model_names(weights: &mut Weights) {
    const PREFIXES: [(&str, &str); 3] = [
        ("language_model.model.", "model."),
        ("model.language_model.", "model."),
        ("language_model.lm_head.", "lm_head."),
    ];
    weights.retain(|n| !VISION.iter().any(|p| n.starts_with(p)));
    let names = weights.names();
    let Some(&(stored, _)) =
        (PREFIXES.iter().take(2)).find(|(p, _)| names.iter().any(|n| n.starts_with(p)))
    else {
        return;
    };
    let head_stored = names
        .iter()
        .any(|n| n.starts_with("language_model.lm_head."));
    let rename = |n: &str| {
        (PREFIXES.iter()).find_map(|(from, to)| Some(format!("{to}{}", n.strip_prefix(from)?)))
    };
    weights.rename(
        rename,
        Box::new(
            move |n| match (n.strip_prefix("model."), n.starts_with("lm_head.")) {
                (Some(rest), _) => Some(format!("{stored}{rest}")),
                (None, true) if head_stored => Some(format!("language_model.{n}")),
                _ => None,
            },
        ),
    );
}

pub(crate) fn load(mut files: Files) -> Result<Loaded, ModelError> {
    let cfg_label = files.label("config.json");
    if !files.exists("config.json") {
        return Err(files.missing("config.json"));
    }
    let mut config = ModelConfig::from_hf_json(&files.text("config.json")?, &cfg_label)?;
    if let Some(gen_cfg) = files.optional_json("generation_config.json")? {
        config.merge_eos(token_id_list(gen_cfg.get("eos_token_id")));
        config.generation = crate::GenerationDefaults::from_hf_json(&gen_cfg);
        if config.bos_token_id.is_none() {
            config.bos_token_id = gen_cfg
                .get("bos_token_id")
                .and_then(Value::as_u64)
                .map(|v| v as u32);
        }
    }

    let mut weights = Weights::new(files.label(""));
    let shards: Vec<String> = if files.exists("model.safetensors.index.json") {
        let label = files.label("model.safetensors.index.json");
        let index = files
            .optional_json("model.safetensors.index.json")?
            .unwrap_or_default();
        let map = index
            .get("weight_map")
            .and_then(Value::as_object)
            .ok_or_else(|| ModelError::corrupt(&label, "missing \"weight_map\""))?;
        let set: BTreeSet<String> = map
            .values()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        set.into_iter().collect()
    } else if files.exists("model.safetensors") {
        vec!["model.safetensors".to_string()]
    } else if let Some(pickle) = ["pytorch_model.bin", "pytorch_model.bin.index.json"]
        .into_iter()
        .find(|f| files.exists(f))
    {
        // PyTorch's pickled checkpoints (older folders: GPT-2's, GPT-J's, Pythia's) run code
        // when read; kiln reads safetensors only.
        return Err(ModelError::MissingFile {
            path: files.label("model.safetensors").into(),
            reason: format!(
                "the folder holds its weights as a PyTorch pickle ({pickle}), which kiln does \
                 not read: convert it to safetensors (transformers' `save_pretrained` writes \
                 them)"
            ),
        });
    } else {
        return Err(files.missing("model.safetensors"));
    };
    for shard in &shards {
        let storage = files.storage(shard)?;
        safetensors::index_file(&mut weights, storage, &files.label(shard))?;
    }
    if config.text_model_of.is_some() {
        language_model_names(&mut weights);
    }
    // GPT-NeoX's, Falcon's, GPT-2's, StarCoder's and BLOOM's folders name their tensors their
    // own way; GPT-NeoX's, Falcon's and BLOOM's keep q, k and v by head or by group, GPT-2's
    // its products transposed. A folder of the base model alone (GPT-2's and BLOOM's original
    // checkpoints) names them without the prefix of the model with its head
    // (`transformer.`).
    if let Some(native) = models::NativeFolder::of(&config) {
        let names = native.names;
        let full = "transformer.";
        let prefix = match names.layers.starts_with(full)
            && !weights.names().iter().any(|n| n.starts_with(full))
        {
            true => full,
            false => "",
        };
        weights.rename(
            |n| names.kiln_name(&format!("{prefix}{n}")),
            Box::new(move |n| {
                let hf = names.hf_name(n)?;
                Some(hf.strip_prefix(prefix).unwrap_or(&hf).to_string())
            }),
        );
        if let Some(order) = native.qkv {
            for name in models::NativeFolder::qkv_names(&config) {
                weights.set_stored_rows(&name, order);
            }
        }
        if config.architecture == Architecture::Gpt2 {
            for i in 0..config.num_layers {
                for part in models::gpt2::CONV1D {
                    weights.set_transposed(&format!("model.layers.{i}.{part}"));
                }
            }
        }
    }
    if !weights.contains("lm_head.weight") {
        config.tie_word_embeddings = true;
    }
    // StableLM 2 12B keeps each head's q/k LayerNorm gain as a tensor of its own
    // (`q_layernorm.norms.{h}`); kiln reads them as one gain a head, `[heads, head_dim]`.
    if config.architecture == Architecture::StableLm && config.qk_layer_norm {
        for i in 0..config.num_layers {
            for (p, heads) in [("q", config.num_heads), ("k", config.num_kv_heads)] {
                let base = format!("model.layers.{i}.self_attn");
                let parts: Vec<String> = (0..heads)
                    .map(|h| format!("{base}.{p}_layernorm.norms.{h}.weight"))
                    .collect();
                weights.stack(&format!("{base}.{p}_norm.weight"), &parts)?;
            }
        }
    }

    let tok_cfg = files
        .optional_json("tokenizer_config.json")?
        .unwrap_or_default();
    let tokenizer = read_tokenizer(&files, &tok_cfg, config.bos_token_id)?;
    let bos = token_string(tok_cfg.get("bos_token"))
        .or_else(|| config.bos_token_id.and_then(|i| tokenizer.id_to_token(i)))
        .unwrap_or_default();
    let eos = token_string(tok_cfg.get("eos_token"));
    if let Some(id) = eos.as_deref().and_then(|e| tokenizer.token_to_id(e)) {
        config.merge_eos([id]);
    }
    let eos = eos
        .or_else(|| {
            config
                .eos_token_ids
                .first()
                .and_then(|&i| tokenizer.id_to_token(i))
        })
        .unwrap_or_default();
    let chat_template = match tokenizer::chat_template(&files, &tok_cfg)? {
        Some((src, origin)) => Some(ChatTemplate::new(&src, &bos, &eos, &origin)?),
        None => None,
    };
    Ok(Loaded {
        config,
        weights,
        tokenizer,
        chat_template,
    })
}
