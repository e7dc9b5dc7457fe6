//! kiln-model: turns model files (Hugging Face folders or GGUF files) into a [`ModelConfig`],
//! lazily-read [`Weights`] with Hugging Face tensor names, a [`Tokenizer`] and a [`ChatTemplate`].
//! No GPU, no threads; builds for wasm32 (memory-mapping only on native targets).

mod chat;
mod config;
mod error;
mod generation;
pub mod gguf;
mod hf;
mod hf_config;
mod lora;
pub mod models;
mod safetensors;
mod storage;
pub mod testing;
mod tokenizer;
pub(crate) mod validate;
mod weights;

use std::collections::HashMap;
use std::path::Path;

pub use chat::{ChatInput, ChatMessage, ChatTemplate, FunctionCall, ToolCall};
pub use config::{
    Activation, Architecture, GraniteScales, LayerRope, Llama3Rope, LongRope,
    MAX_EXPERTS_PER_TOKEN, ModelConfig, Moe, RopeScaling, Scoring, SharedExpert, Yarn,
};
pub use error::ModelError;
pub use generation::GenerationDefaults;
pub use gguf::dequant::DType;
pub use lora::{LoraAdapter, LoraPair, LoraPairs};
pub use models::{Buf, GEMMA_CHAT_TEMPLATE, Layer, ModelTensors, Op, Tensor};
pub use tokenizer::Tokenizer;
pub use weights::Weights;

/// A loaded model: everything the engine needs apart from the GPU.
pub struct Model {
    pub config: ModelConfig,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    /// The file or folder it came from, for display.
    pub source: String,
}

impl Model {
    /// Loads a Hugging Face model folder or a `.gguf` file.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let source = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| storage::io_error(path, e))?;
        if meta.is_dir() {
            let l = hf::load(hf::Files::Dir(path))?;
            return Model::assemble(l.config, l.weights, l.tokenizer, l.chat_template, source);
        }
        let storage = storage::Storage::map(path)?;
        if !storage.bytes().starts_with(gguf::reader::GGUF_MAGIC) {
            return Err(ModelError::corrupt(
                &source,
                "not a GGUF file (bad magic) — pass a .gguf file or a Hugging Face model folder",
            ));
        }
        let l = gguf::load(storage, &source)?;
        Model::assemble(l.config, l.weights, l.tokenizer, l.chat_template, source)
    }

    /// Loads a GGUF model from memory (e.g. fetched by a browser); `name` is shown to users.
    pub fn from_gguf_bytes(bytes: Vec<u8>, name: &str) -> Result<Model, ModelError> {
        let l = gguf::load(storage::Storage::Owned(bytes), name)?;
        Model::assemble(
            l.config,
            l.weights,
            l.tokenizer,
            l.chat_template,
            name.to_string(),
        )
    }

    /// Loads a Hugging Face model from in-memory files keyed by file name
    /// (`config.json`, `tokenizer.json`, `model.safetensors` or the index and its shards, ...).
    pub fn from_hf_bytes(files: HashMap<String, Vec<u8>>) -> Result<Model, ModelError> {
        let l = hf::load(hf::Files::Mem(files))?;
        Model::assemble(
            l.config,
            l.weights,
            l.tokenizer,
            l.chat_template,
            "<in-memory model>".to_string(),
        )
    }

    /// Replaces the model's chat template with `source` (a Jinja template, as in
    /// `tokenizer_config.json`; `origin` names it in errors), with the model's own BOS and
    /// EOS tokens.
    pub fn set_chat_template(&mut self, source: &str, origin: &str) -> Result<(), ModelError> {
        let name = |id: Option<u32>| {
            id.and_then(|i| self.tokenizer.id_to_token(i))
                .unwrap_or_default()
        };
        let template = ChatTemplate::new(
            source,
            &name(self.config.bos_token_id),
            &name(self.config.eos_token_ids.first().copied()),
            origin,
        )?;
        self.chat_template = Some(template);
        Ok(())
    }

    fn assemble(
        config: ModelConfig,
        mut weights: Weights,
        tokenizer: Tokenizer,
        chat_template: Option<ChatTemplate>,
        source: String,
    ) -> Result<Model, ModelError> {
        for (name, layout) in models::interleaved_rows(&config) {
            weights.set_interleaved(&name, layout);
        }
        models::olmo::unit_gains(&config, &mut weights)?;
        validate::check_weights(&config, &weights, &source)?;
        Ok(Model {
            config,
            weights,
            tokenizer,
            chat_template,
            source,
        })
    }
}
