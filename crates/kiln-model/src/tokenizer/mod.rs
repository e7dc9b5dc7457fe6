//! `Tokenizer`: kiln's text ↔ token-id interface, backed by the `tokenizers` crate. Built from an
//! HF `tokenizer.json`, or from GGUF tokenizer metadata (see `gguf_bpe` and `gguf_spm`).

pub(crate) mod gguf_bpe;
mod gguf_pre;
pub(crate) mod gguf_spm;
pub(crate) mod sentencepiece;
mod token_bytes;

use std::collections::HashSet;

use crate::ModelError;

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    special: HashSet<u32>,
    /// Token ids, added tokens included: counted once, since `tokenizers` counts them by
    /// building the whole vocabulary map (milliseconds at 49k tokens, and decode checks it).
    vocab_size: usize,
    /// GGUF tokenizers have no post-processor: BOS is prepended here when `add_bos_token` is set.
    prepend_bos: Option<u32>,
    source: String,
}

impl Tokenizer {
    /// From the contents of a Hugging Face `tokenizer.json`; `file` names it in errors.
    pub fn from_json_bytes(json: &[u8], file: &str) -> Result<Tokenizer, ModelError> {
        let inner =
            tokenizers::Tokenizer::from_bytes(json).map_err(|e| ModelError::tokenizer(file, e))?;
        Ok(Tokenizer::from_parts(inner, None, file))
    }

    pub(crate) fn from_parts(
        inner: tokenizers::Tokenizer,
        prepend_bos: Option<u32>,
        source: &str,
    ) -> Tokenizer {
        let special = inner
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| id)
            .collect();
        Tokenizer {
            vocab_size: inner.get_vocab_size(true),
            inner,
            special,
            prepend_bos,
            source: source.to_string(),
        }
    }

    /// Token ids of `text`. Special tokens written in the text (e.g. `<|im_start|>`) are recognised;
    /// `add_special_tokens` adds BOS etc. as the model's tokenizer config says.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, ModelError> {
        let enc = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| ModelError::tokenizer(&self.source, format!("encoding failed: {e}")))?;
        let mut ids = enc.get_ids().to_vec();
        if let (true, Some(bos)) = (add_special_tokens, self.prepend_bos) {
            ids.insert(0, bos);
        }
        Ok(ids)
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, ModelError> {
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= self.vocab_size) {
            return Err(ModelError::tokenizer(
                &self.source,
                format!(
                    "token id {bad} is outside the vocabulary of {}",
                    self.vocab_size
                ),
            ));
        }
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| ModelError::tokenizer(&self.source, format!("decoding failed: {e}")))
    }

    /// Number of token ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    pub fn token_to_id(&self, s: &str) -> Option<u32> {
        self.inner.token_to_id(s)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// True for special (control) tokens such as `<|im_end|>`.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.contains(&id)
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// One `added_tokens` entry of a tokenizer.json.
pub(crate) fn added_token_json(id: u32, content: &str, special: bool) -> serde_json::Value {
    serde_json::json!({
        "id": id, "content": content, "single_word": false, "lstrip": false,
        "rstrip": false, "normalized": false, "special": special,
    })
}

#[cfg(test)]
mod tests {
    use super::{Tokenizer, added_token_json};

    #[test]
    fn vocabulary_counts_added_tokens_and_bounds_decode() {
        // Three words and one added special token.
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [added_token_json(3, "<eos>", true)],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "c": 2}, "unk_token": "a"},
        });
        let t = Tokenizer::from_json_bytes(json.to_string().as_bytes(), "tiny.json").unwrap();
        assert_eq!(t.vocab_size(), 4);
        assert!(t.decode(&[0, 2, 3], false).unwrap().contains('c'));
        let e = t.decode(&[0, 4], false).unwrap_err().to_string();
        assert!(
            e.contains("token id 4") && e.contains("vocabulary of 4"),
            "{e}"
        );
        assert!(e.contains("tiny.json"), "{e}");
    }
}
