//! GGUF `tokenizer.ggml.model = "llama"` (SentencePiece BPE with scores and byte fallback,
//! Llama 2 / TinyLlama) → an equivalent `tokenizers` BPE: `▁` for spaces, merges derived from
//! the piece scores (the same construction HF's converter uses), byte-fallback `<0xNN>` tokens.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::added_token_json;

const TOKEN_TYPE_UNKNOWN: u32 = 2;
const TOKEN_TYPE_CONTROL: u32 = 3;
const TOKEN_TYPE_USER_DEFINED: u32 = 4;

/// Merges implied by the scores: every split of a piece into two vocabulary pieces, ordered by the
/// merged piece's score (highest first), ties by piece id, then by the ids of the two halves.
pub(crate) fn merges_from_scores(tokens: &[String], scores: &[f32]) -> Vec<(String, String)> {
    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let mut all: Vec<(usize, usize, f32)> = Vec::new();
    for (i, piece) in tokens.iter().enumerate() {
        let score = scores.get(i).copied().unwrap_or(0.0);
        let mut local: Vec<(usize, usize, f32)> = piece
            .char_indices()
            .skip(1)
            .filter_map(|(at, _)| Some((*ids.get(&piece[..at])?, *ids.get(&piece[at..])?, score)))
            .collect();
        local.sort_by_key(|&(l, r, _)| (l, r));
        all.extend(local);
    }
    all.sort_by(|a, b| b.2.total_cmp(&a.2));
    all.into_iter()
        .map(|(l, r, _)| (tokens[l].clone(), tokens[r].clone()))
        .collect()
}

pub(crate) fn tokenizer_json(
    tokens: &[String],
    token_types: &[u32],
    scores: &[f32],
    add_space_prefix: bool,
) -> Value {
    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    let mut added = Vec::new();
    let mut unk = None;
    for (id, tok) in tokens.iter().enumerate() {
        vocab.insert(tok.clone(), json!(id));
        match token_types.get(id).copied() {
            Some(TOKEN_TYPE_UNKNOWN) => {
                unk = Some(tok.clone());
                added.push(added_token_json(id as u32, tok, true));
            }
            Some(TOKEN_TYPE_CONTROL) => added.push(added_token_json(id as u32, tok, true)),
            Some(TOKEN_TYPE_USER_DEFINED) => added.push(added_token_json(id as u32, tok, false)),
            _ => {}
        }
    }
    let merges: Vec<Value> = merges_from_scores(tokens, scores)
        .into_iter()
        .map(|(a, b)| json!([a, b]))
        .collect();
    let mut norm = Vec::new();
    if add_space_prefix {
        norm.push(json!({"type": "Prepend", "prepend": "▁"}));
    }
    norm.push(json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}));
    let mut dec = vec![
        json!({"type": "Replace", "pattern": {"String": "▁"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if add_space_prefix {
        dec.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": norm},
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": dec},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    })
}
