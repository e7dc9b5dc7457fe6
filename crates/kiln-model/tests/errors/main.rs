//! Error reporting: each failure names the file and the offending thing.
//!
//! This file holds the shared helpers and the missing and truncated files; `architectures.rs`
//! the architectures kiln refuses by name, `features_not_run.rs` the options of known
//! architectures that it does not run (biases, scales, experts, cross-layer attention),
//! `gguf_tensors.rs` GGUF tensors that are missing, unread, of an unknown type or short,
//! `hf_folders.rs` the tensors of Hugging Face folders under their families' own names.

mod architectures;
mod features_not_run;
mod gguf_tensors;
mod hf_folders;

use kiln_model::testing::{self, TinyConfig, model_gguf, tiny_tensors, tiny_tokenizer};
use kiln_model::{DType, Model, ModelError};

fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-err-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tiny_gguf_bytes() -> Vec<u8> {
    let mc = TinyConfig::default().model_config();
    model_gguf(
        &mc,
        &tiny_tensors(&mc, 1),
        DType::Q8_0,
        &tiny_tokenizer::gguf_tokenizer(),
    )
    .to_bytes()
}

/// A tiny random model of `cfg`'s shape as a GGUF file of f32 tensors, to be changed.
fn f32_gguf(cfg: &TinyConfig) -> testing::GgufBuilder {
    let mc = cfg.model_config();
    model_gguf(
        &mc,
        &tiny_tensors(&mc, 1),
        DType::F32,
        &tiny_tokenizer::gguf_tokenizer(),
    )
}

#[test]
fn missing_file() {
    let p = std::path::Path::new("/nonexistent/kiln/model.gguf");
    let e = Model::load(p).err().expect("must fail");
    assert!(matches!(e, ModelError::MissingFile { .. }), "{e:?}");
    assert!(
        e.to_string().contains("/nonexistent/kiln/model.gguf"),
        "{e}"
    );

    let dir = tmp("missing-tok");
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(matches!(e, ModelError::MissingFile { .. }), "{e:?}");
    assert!(e.to_string().contains("tokenizer.json"), "{e}");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(e.to_string().contains("model.safetensors"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn truncated_gguf() {
    let bytes = tiny_gguf_bytes();
    let dir = tmp("trunc");
    for cut in [bytes.len() - 100, 2000, 40, 3] {
        let p = dir.join(format!("cut{cut}.gguf"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        let e = Model::load(&p).err().expect("truncated file must fail");
        assert!(matches!(e, ModelError::Corrupt { .. }), "{cut}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("cut{cut}.gguf")), "{msg}");
        assert!(
            msg.contains("truncated") || msg.contains("ends at byte") || msg.contains("not a GGUF"),
            "{msg}"
        );
    }
    // Truncated safetensors too.
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let st = dir.join("model.safetensors");
    let data = std::fs::read(&st).unwrap();
    std::fs::write(&st, &data[..data.len() / 2]).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(
        e.to_string().contains("model.safetensors") && e.to_string().contains("truncated"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
