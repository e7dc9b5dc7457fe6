//! GGUF `tokenizer.ggml.model = "gpt2"` → byte-level BPE, with the pre-tokenizer that
//! `tokenizer.ggml.pre` names, so ids match the original Hugging Face tokenizer exactly.

use serde_json::{Value, json};

use super::added_token_json;
use crate::ModelError;

/// GPT-2 style token types in `tokenizer.ggml.token_type`.
pub(crate) const TOKEN_TYPE_CONTROL: u32 = 3;
pub(crate) const TOKEN_TYPE_USER_DEFINED: u32 = 4;

/// Llama 3's split regex (numbers in groups of up to three digits).
pub const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split regex (every digit on its own).
pub const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn byte_level(use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
}

fn split(regex: &str) -> Value {
    json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false})
}

/// (normalizer, pre_tokenizer, ignore_merges) for a `tokenizer.ggml.pre` value.
fn pre_tokenizer(pre: &str, file: &str) -> Result<(Value, Value, bool), ModelError> {
    Ok(match pre {
        "smollm" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
            false,
        ),
        "llama-bpe" | "llama3" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]}),
            true,
        ),
        "qwen2" => (
            json!({"type": "NFC"}),
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
            false,
        ),
        "gpt2" | "default" => (Value::Null, byte_level(true), false),
        other => {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!(
                    "tokenizer pre-tokenizer \"{other}\" (supported: smollm, llama-bpe, llama3, qwen2, gpt2, default)"
                ),
            });
        }
    })
}

/// Builds the tokenizer.json for a GGUF byte-level BPE vocabulary.
pub(crate) fn tokenizer_json(
    tokens: &[String],
    token_types: &[u32],
    merges: &[String],
    pre: &str,
    file: &str,
) -> Result<Value, ModelError> {
    let (normalizer, pre_tok, ignore_merges) = pre_tokenizer(pre, file)?;
    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    let mut added = Vec::new();
    for (id, tok) in tokens.iter().enumerate() {
        vocab.insert(tok.clone(), json!(id));
        match token_types.get(id).copied() {
            Some(TOKEN_TYPE_CONTROL) => added.push(added_token_json(id as u32, tok, true)),
            Some(TOKEN_TYPE_USER_DEFINED) => added.push(added_token_json(id as u32, tok, false)),
            _ => {}
        }
    }
    let mut pairs = Vec::with_capacity(merges.len());
    for m in merges {
        let (a, b) = m.split_once(' ').ok_or_else(|| {
            ModelError::tokenizer(
                file,
                format!("malformed merge \"{m}\" in tokenizer.ggml.merges"),
            )
        })?;
        pairs.push(json!([a, b]));
    }
    Ok(json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tok,
        "post_processor": null,
        "decoder": byte_level(true),
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": ignore_merges, "vocab": vocab, "merges": pairs,
        },
    }))
}
