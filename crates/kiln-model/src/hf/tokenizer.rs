//! A Hugging Face folder's tokenizer and chat template: `tokenizer.json`, or SentencePiece's
//! `tokenizer.model` where it has none; the template from `chat_template.jinja` (what
//! transformers saves, read before the others), `tokenizer_config.json`'s `chat_template`, or
//! a processor's `chat_template.json` (multimodal folders).

use serde_json::Value;

use super::Files;
use crate::{ModelError, Tokenizer};

/// The folder's `tokenizer.json`, or where it has none, SentencePiece's `tokenizer.model` with
/// the added tokens of `tokenizer_config.json` (`tok_cfg`), BOS first unless it says
/// `add_bos_token` false (Hugging Face's SentencePiece tokenizers' default).
pub(super) fn read_tokenizer(
    files: &Files,
    tok_cfg: &Value,
    bos: Option<u32>,
) -> Result<Tokenizer, ModelError> {
    if files.exists("tokenizer.json") {
        let text = files.text("tokenizer.json")?;
        return Tokenizer::from_json_bytes(text.as_bytes(), &files.label("tokenizer.json"));
    }
    if !files.exists("tokenizer.model") {
        return Err(files.missing("tokenizer.json"));
    }
    let label = files.label("tokenizer_config.json");
    let added = (tok_cfg
        .get("added_tokens_decoder")
        .and_then(Value::as_object))
    .into_iter()
    .flatten()
    .map(|(id, t)| {
        let content = t.get("content").and_then(Value::as_str);
        match (id.parse::<u32>(), content) {
            (Ok(id), Some(c)) => Ok((id, c.to_string(), t.get("special") == Some(&true.into()))),
            _ => Err(ModelError::corrupt(
                &label,
                format!("added_tokens_decoder entry \"{id}\" is not an id with a content"),
            )),
        }
    })
    .collect::<Result<Vec<_>, _>>()?;
    // What Hugging Face's SentencePiece tokenizers may be told that kiln's reading does not
    // run: no space prefix on text after an added token (`legacy` false), EOS after the text.
    let flag = |key: &str| tok_cfg.get(key).and_then(Value::as_bool);
    for (key, set, what) in [
        (
            "legacy",
            false,
            "text after an added token read without a space prefix",
        ),
        ("add_eos_token", true, "EOS added after the text"),
    ] {
        if flag(key) == Some(set) {
            return Err(ModelError::Unsupported {
                file: label.clone(),
                reason: format!("a SentencePiece tokenizer.model with {what} ({key} {set})"),
            });
        }
    }
    let add_bos = flag("add_bos_token") != Some(false);
    crate::tokenizer::sentencepiece::from_model_bytes(
        &files.bytes("tokenizer.model")?,
        &added,
        &label,
        add_bos,
        bos,
        &files.label("tokenizer.model"),
    )
}

/// A `"<s>"` or `{"content": "<s>", ...}` token entry of tokenizer_config.json.
pub(super) fn token_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// `chat_template` is a string, or a list of `{name, template}` (the "default" one is used).
fn chat_template_source(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(list) => list
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
            .or_else(|| list.first())
            .and_then(|t| t.get("template"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

/// The folder's chat template and the file it came from: `chat_template.jinja` (transformers
/// reads it before `tokenizer_config.json`'s), else `tokenizer_config.json`'s `chat_template`
/// (`tok_cfg`), else a processor's `chat_template.json`.
pub(super) fn chat_template(
    files: &Files,
    tok_cfg: &Value,
) -> Result<Option<(String, String)>, ModelError> {
    if files.exists("chat_template.jinja") {
        let label = files.label("chat_template.jinja");
        return Ok(Some((files.text("chat_template.jinja")?, label)));
    }
    if let Some(src) = chat_template_source(tok_cfg.get("chat_template")) {
        return Ok(Some((src, files.label("tokenizer_config.json"))));
    }
    let processor = files.optional_json("chat_template.json")?;
    Ok(
        (processor.and_then(|p| chat_template_source(p.get("chat_template"))))
            .map(|src| (src, files.label("chat_template.json"))),
    )
}
