//! SentencePiece's own `tokenizer.model` files, read where a Hugging Face folder has no
//! `tokenizer.json`: kiln's tokens and decoded text against SentencePiece's on a BPE model it
//! trained (`tests/reference/sentencepiece/`, made by `scripts/sentencepiece_reference.py`:
//! byte fallback for characters outside its corpus, a space prefix, runs of spaces kept,
//! user-defined pieces whole, the text around them read as llama.cpp reads it), the folder's
//! added tokens and BOS, and the models kiln does not read refused by name.

use std::path::{Path, PathBuf};

use kiln_model::testing::{self, TinyConfig};
use kiln_model::{Model, ModelError};
use serde_json::{Value, json};

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/reference/sentencepiece")
}

/// A folder removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tiny model's folder whose tokenizer is `model` (a `tokenizer.model`'s bytes) and
/// `tokenizer_config.json` is `tok_cfg`.
fn folder(name: &str, model: &[u8], tok_cfg: Value) -> Folder {
    let dir = Folder(std::env::temp_dir().join(format!("{name}-{}", std::process::id())));
    let cfg = TinyConfig {
        vocab_size: 600,
        ..TinyConfig::default()
    };
    testing::write_tiny_llama(dir.path(), &cfg, 1).unwrap();
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    std::fs::write(dir.path().join("tokenizer.model"), model).unwrap();
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        tok_cfg.to_string(),
    )
    .unwrap();
    dir
}

fn bpe_model() -> Vec<u8> {
    std::fs::read(reference().join("bpe.model")).unwrap()
}

#[test]
fn tokens_and_text_match_sentencepiece() {
    let want: Value =
        serde_json::from_slice(&std::fs::read(reference().join("bpe.json")).unwrap()).unwrap();
    let dir = folder("kiln-spm", &bpe_model(), json!({}));
    let model = Model::load(dir.path()).unwrap();
    let tok = &model.tokenizer;
    assert_eq!(
        tok.vocab_size(),
        want["vocab_size"].as_u64().unwrap() as usize
    );
    for case in want["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        // SentencePiece's own ids, but where the text has user-defined pieces: each stretch
        // of text around them then reads with a space prefix of its own, as llama.cpp and
        // Hugging Face's legacy SentencePiece tokenizers read it (SentencePiece puts one
        // before the whole text).
        let ids: Vec<u32> = serde_json::from_value(case["ids_by_segment"].clone()).unwrap();
        assert_eq!(tok.encode(text, false).unwrap(), ids, "{text:?}");
        if !text.contains("<|im_") {
            assert_eq!(case["ids"], case["ids_by_segment"], "{text:?}");
        }
        assert_eq!(
            tok.decode(&ids, true).unwrap(),
            case["decoded"].as_str().unwrap(),
            "{text:?}"
        );
        // BOS first (Hugging Face's SentencePiece tokenizers' default).
        let with_bos = tok.encode(text, true).unwrap();
        assert_eq!(
            with_bos[0],
            want["bos"].as_u64().unwrap() as u32,
            "{text:?}"
        );
        assert_eq!(with_bos[1..], ids[..], "{text:?}");
    }
    // Characters outside the corpus fall back to bytes.
    let byte = tok.token_to_id("<0xF0>").unwrap();
    assert!(tok.encode("🙂", false).unwrap().contains(&byte));
}

/// `tokenizer_config.json`'s word: no BOS where `add_bos_token` is false; its added tokens
/// special (left out of decoded text) where it says so, at the ids the model gives them; an
/// added token at another id than the model's piece of that text is refused naming the
/// config, as are `legacy` false and `add_eos_token`, which kiln's reading does not run.
#[test]
fn the_folders_tokenizer_config_applies() {
    let im_start = "<|im_start|>";
    let dir = folder(
        "kiln-spm-cfg",
        &bpe_model(),
        json!({"add_bos_token": false, "added_tokens_decoder": {
            "3": {"content": im_start, "special": true},
            "600": {"content": "<|tool|>", "special": true},
        }}),
    );
    let model = Model::load(dir.path()).unwrap();
    let tok = &model.tokenizer;
    let ids = tok.encode("<|im_start|>hi<|tool|>", true).unwrap();
    assert_eq!((ids[0], ids[ids.len() - 1]), (3, 600), "{ids:?}");
    assert!(tok.is_special(3) && tok.is_special(600));
    assert_eq!(tok.decode(&ids, true).unwrap(), "hi");
    drop(model);
    let dir = folder(
        "kiln-spm-bad",
        &bpe_model(),
        json!({"added_tokens_decoder": {"5": {"content": im_start, "special": true}}}),
    );
    let e = Model::load(dir.path())
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains(im_start) && e.contains("tokenizer_config.json"),
        "{e}"
    );
    drop(dir);
    for (key, value) in [("legacy", false), ("add_eos_token", true)] {
        let dir = folder("kiln-spm-flag", &bpe_model(), json!({ key: value }));
        let e = Model::load(dir.path())
            .err()
            .expect("must fail")
            .to_string();
        assert!(
            e.contains(key) && e.contains("tokenizer_config.json"),
            "{e}"
        );
    }
}

/// What the BPE construction does not run exactly is refused by name: a unigram model
/// (protobuf's default kind), and a BPE model that collapses runs of spaces (its
/// normalizer's default).
#[test]
fn models_kiln_does_not_read_are_refused() {
    // A ModelProto holding only a trainer spec (field 2) with `model_type` (field 3) set.
    for (kind, named) in [(1u8, "unigram"), (2, "remove_extra_whitespaces")] {
        let dir = folder("kiln-spm-refused", &[0x12, 0x02, 0x18, kind], json!({}));
        let e = Model::load(dir.path()).err().expect("must fail");
        assert!(matches!(e, ModelError::Unsupported { .. }), "{e:?}");
        assert!(e.to_string().contains(named), "{e}");
    }
    let dir = folder("kiln-spm-garbage", b"not a protobuf message", json!({}));
    let e = Model::load(dir.path())
        .err()
        .expect("must fail")
        .to_string();
    assert!(e.contains("SentencePiece"), "{e}");
}
