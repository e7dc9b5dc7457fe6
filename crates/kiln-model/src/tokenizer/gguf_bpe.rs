//! GGUF `tokenizer.ggml.model = "gpt2"` → byte-level BPE, with the pre-tokenizer that
//! `tokenizer.ggml.pre` names, so ids match the original Hugging Face tokenizer exactly.

use serde_json::{Value, json};

use super::added_token_json;
use super::gguf_pre::{Pre, byte_level};
use crate::ModelError;

/// GPT-2 style token types in `tokenizer.ggml.token_type`.
pub(crate) const TOKEN_TYPE_CONTROL: u32 = 3;
pub(crate) const TOKEN_TYPE_USER_DEFINED: u32 = 4;

/// The markers gpt-oss's replies are written in (its harmony format: a message's start, its
/// channel, its text, a constrained tool call's type, its end): control tokens of the
/// o200k_harmony vocabulary kept in decoded text, as llama.cpp keeps them, so that a reply's
/// channels can be told apart. `<|return|>` and `<|call|>`, which end a reply, stay special.
const HARMONY_MARKERS: [&str; 5] = [
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|end|>",
];

/// Whether `tokens` is gpt-oss's o200k_harmony vocabulary: replies end with `<|return|>`
/// (an answer) or `<|call|>` (a tool call), and a message within one with `<|end|>`.
pub(crate) fn is_harmony<S: AsRef<str>>(tokens: &[S]) -> bool {
    ["<|return|>", "<|call|>", "<|end|>", "<|channel|>"]
        .iter()
        .all(|m| tokens.iter().any(|t| t.as_ref() == *m))
}

/// Builds the tokenizer.json for a GGUF byte-level BPE vocabulary, and whether its rule adds a
/// BOS token where the file does not say.
pub(crate) fn tokenizer_json(
    tokens: &[String],
    token_types: &[u32],
    merges: &[String],
    pre: &str,
    file: &str,
) -> Result<(Value, bool), ModelError> {
    let Pre {
        normalizer,
        pre_tokenizer,
        ignore_merges,
        add_bos,
    } = Pre::named(pre, file)?;
    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    let mut added = Vec::new();
    let harmony = is_harmony(tokens);
    for (id, tok) in tokens.iter().enumerate() {
        vocab.insert(tok.clone(), json!(id));
        match token_types.get(id).copied() {
            Some(TOKEN_TYPE_CONTROL) if harmony && HARMONY_MARKERS.contains(&tok.as_str()) => {
                added.push(added_token_json(id as u32, tok, false))
            }
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
    let json = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": null,
        "decoder": byte_level(true),
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": ignore_merges, "vocab": vocab, "merges": pairs,
        },
    });
    Ok((json, add_bos))
}
