//! SentencePiece's own model file, `tokenizer.model` (a protobuf `ModelProto`), as the Hugging
//! Face folders of Llama 2, InternLM2 and other SentencePiece models carry it, some without a
//! `tokenizer.json`: its pieces, scores and kinds are the same vocabulary a GGUF "llama"
//! tokenizer holds, built the same way ([`super::gguf_spm`]). Only what that construction runs
//! exactly is read: BPE models without normalization, spaces escaped as `▁` (with or without a
//! space prefix); unigram models, normalization rules, collapsed whitespace and suffix spaces
//! are refused by name.

use prost::Message;

use super::{Tokenizer, gguf_spm};
use crate::ModelError;

/// The parts of `ModelProto` kiln reads (protobuf skips the others).
#[derive(Clone, PartialEq, Message)]
struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pieces: Vec<Piece>,
    #[prost(message, optional, tag = "2")]
    trainer_spec: Option<TrainerSpec>,
    #[prost(message, optional, tag = "3")]
    normalizer_spec: Option<NormalizerSpec>,
}

/// A piece: its text, score and kind (1 normal, 2 unknown, 3 control, 4 user-defined,
/// 5 unused, 6 byte; GGUF's token types are the same numbers).
#[derive(Clone, PartialEq, Message)]
struct Piece {
    #[prost(string, optional, tag = "1")]
    piece: Option<String>,
    #[prost(float, optional, tag = "2")]
    score: Option<f32>,
    #[prost(int32, optional, tag = "3")]
    kind: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct TrainerSpec {
    /// 1 unigram (protobuf's default), 2 BPE, 3 word, 4 char.
    #[prost(int32, optional, tag = "3")]
    model_type: Option<i32>,
    #[prost(bool, optional, tag = "24")]
    treat_whitespace_as_suffix: Option<bool>,
    #[prost(int32, optional, tag = "41")]
    bos_id: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct NormalizerSpec {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "2")]
    precompiled_charsmap: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "3")]
    add_dummy_prefix: Option<bool>,
    #[prost(bool, optional, tag = "4")]
    remove_extra_whitespaces: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    escape_whitespaces: Option<bool>,
}

/// The tokenizer of the `tokenizer.model` `bytes` (`file` names it in errors), with the
/// `added` tokens (id, content, special) the file `added_from` (a folder's
/// `tokenizer_config.json`) declares: pieces of the model (the id its content has there) or
/// ids past it. With `add_bos`, encoding with special tokens starts with BOS: `bos`, or the
/// file's own BOS piece.
pub(crate) fn from_model_bytes(
    bytes: &[u8],
    added: &[(u32, String, bool)],
    added_from: &str,
    add_bos: bool,
    bos: Option<u32>,
    file: &str,
) -> Result<Tokenizer, ModelError> {
    let model = ModelProto::decode(bytes)
        .map_err(|e| ModelError::tokenizer(file, format!("not a SentencePiece model: {e}")))?;
    let trainer = model.trainer_spec.unwrap_or_default();
    let norm = model.normalizer_spec.unwrap_or_default();
    let refuse = |what: String| {
        Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("a SentencePiece tokenizer with {what}"),
        })
    };
    match trainer.model_type.unwrap_or(1) {
        2 => {}
        1 => return refuse("a unigram model (model_type UNIGRAM)".into()),
        t => return refuse(format!("model_type {t} (only BPE is read)")),
    }
    let charsmap = norm
        .precompiled_charsmap
        .as_ref()
        .is_some_and(|m| !m.is_empty());
    match norm.name.as_deref() {
        Some("identity") => {}
        None if !charsmap => {}
        None => return refuse("normalization rules (precompiled_charsmap)".into()),
        Some(rule) => return refuse(format!("the normalization rule \"{rule}\"")),
    }
    for (set, what) in [
        (
            norm.remove_extra_whitespaces.unwrap_or(true),
            "runs of spaces collapsed (remove_extra_whitespaces)",
        ),
        (
            !norm.escape_whitespaces.unwrap_or(true),
            "spaces not escaped as ▁ (escape_whitespaces false)",
        ),
        (
            trainer.treat_whitespace_as_suffix.unwrap_or(false),
            "spaces ending pieces (treat_whitespace_as_suffix)",
        ),
    ] {
        if set {
            return refuse(what.into());
        }
    }
    let mut tokens = Vec::with_capacity(model.pieces.len());
    let mut types = Vec::with_capacity(model.pieces.len());
    let mut scores = Vec::with_capacity(model.pieces.len());
    for p in model.pieces {
        tokens.push(p.piece.unwrap_or_default());
        types.push(p.kind.unwrap_or(1) as u32);
        scores.push(p.score.unwrap_or(0.0));
    }
    let mut json = gguf_spm::tokenizer_json(
        &tokens,
        &types,
        &scores,
        norm.add_dummy_prefix.unwrap_or(true),
    );
    for (id, content, special) in added {
        let at = tokens.iter().position(|t| t == content);
        if at.is_some_and(|at| at != *id as usize)
            || (at.is_none() && (*id as usize) < tokens.len())
        {
            return Err(ModelError::tokenizer(
                added_from,
                format!(
                    "added token \"{content}\" is given id {id}, which {file}'s pieces do not \
                     give it"
                ),
            ));
        }
        // (The folder's word on which are special stands over the piece's kind.)
        if let Some(list) = json["added_tokens"].as_array_mut() {
            match list.iter_mut().find(|t| t["id"] == *id) {
                Some(t) => t["special"] = (*special).into(),
                None => list.push(super::added_token_json(*id, content, *special)),
            }
        }
    }
    let bos = bos.or(trainer
        .bos_id
        .unwrap_or(1)
        .try_into()
        .ok()
        .filter(|&i: &u32| (i as usize) < tokens.len()));
    let inner = tokenizers::Tokenizer::from_bytes(json.to_string().as_bytes())
        .map_err(|e| ModelError::tokenizer(file, e))?;
    Ok(Tokenizer::from_parts(
        inner,
        if add_bos { bos } else { None },
        file,
    ))
}
