//! The crate's error type: every variant names the file (or tensor, or key) involved and why it failed.

use std::path::PathBuf;

/// Everything that can go wrong turning model files into a [`crate::Model`].
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model file not found: {path} ({reason})")]
    MissingFile { path: PathBuf, reason: String },

    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("corrupt or truncated file {file}: {reason}")]
    Corrupt { file: String, reason: String },

    #[error("invalid config in {file}: {reason}")]
    InvalidConfig { file: String, reason: String },

    #[error(
        "unsupported architecture \"{architecture}\" in {file} (supported: llama, mistral, mixtral, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3, smollm3, granite, granitemoe, minicpm, command-r, cohere2, stablelm, nemotron, starcoder2, phi2, gptneox, gpt_neox, falcon, gpt2, starcoder, gpt_bigcode, bloom, mpt, gptj, internlm2, exaone, olmo, olmo2, olmo3, olmoe, exaone4, glm4, glm4moe, ernie4_5, ernie4_5-moe, seed_oss, arcee, dots1, hunyuan-dense, hunyuan-moe, gpt-oss)"
    )]
    UnsupportedArchitecture { file: String, architecture: String },

    #[error("unsupported tensor type {dtype} for tensor \"{tensor}\" in {file}")]
    UnsupportedTensorType {
        file: String,
        tensor: String,
        dtype: String,
    },

    #[error("missing tensor \"{tensor}\" in {file}")]
    MissingTensor { file: String, tensor: String },

    #[error("{file} does not fit the model: {reason}")]
    Mismatch { file: String, reason: String },

    #[error("unsupported feature in {file}: {reason}")]
    Unsupported { file: String, reason: String },

    #[error("tokenizer error ({file}): {reason}")]
    Tokenizer { file: String, reason: String },

    #[error("chat template error ({file}): {reason}")]
    ChatTemplate { file: String, reason: String },
}

impl ModelError {
    pub(crate) fn corrupt(file: impl Into<String>, reason: impl Into<String>) -> Self {
        ModelError::Corrupt {
            file: file.into(),
            reason: reason.into(),
        }
    }
    pub(crate) fn config(file: impl Into<String>, reason: impl Into<String>) -> Self {
        ModelError::InvalidConfig {
            file: file.into(),
            reason: reason.into(),
        }
    }
    pub(crate) fn tokenizer(file: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        ModelError::Tokenizer {
            file: file.into(),
            reason: reason.to_string(),
        }
    }
}
