//! Error reporting: each failure names the file and the offending thing.

use kiln_model::testing::{self, MetaValue, TinyConfig, model_gguf, tiny_tensors, tiny_tokenizer};
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

#[test]
fn unknown_architecture() {
    let mc = TinyConfig::default().model_config();
    let mut b = model_gguf(
        &mc,
        &tiny_tensors(&mc, 1),
        DType::F32,
        &tiny_tokenizer::gguf_tokenizer(),
    );
    b.meta("general.architecture", MetaValue::String("mamba".into()));
    let e = Model::from_gguf_bytes(b.to_bytes(), "weird.gguf")
        .err()
        .expect("must fail");
    assert!(
        matches!(e, ModelError::UnsupportedArchitecture { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("mamba") && e.to_string().contains("weird.gguf"),
        "{e}"
    );

    let dir = tmp("arch");
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let cfg_path = dir.join("config.json");
    let cfg = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .replace("\"llama\"", "\"phi3\"");
    std::fs::write(&cfg_path, cfg).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(
        e.to_string().contains("phi3") && e.to_string().contains("config.json"),
        "{e}"
    );
    // Mistral with a real sliding window is refused.
    let cfg = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .replace("\"phi3\"", "\"mistral\"")
        .replace(
            "\"torch_dtype\"",
            "\"sliding_window\": 128, \"torch_dtype\"",
        );
    std::fs::write(&cfg_path, cfg).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(e.to_string().contains("sliding"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unsupported_tensor_type() {
    let mc = TinyConfig::default().model_config();
    let name = "model.layers.0.mlp.down_proj.weight";
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != name)
        .collect();
    let mut b = model_gguf(&mc, &tensors, DType::F32, &tiny_tokenizer::gguf_tokenizer());
    // GGML type 12 is Q4_K: 144 bytes per 256 elements.
    b.raw_tensor(
        "blk.0.ffn_down.weight",
        &[160, 64],
        12,
        vec![0u8; 160 * 64 / 256 * 144],
    );
    let e = Model::from_gguf_bytes(b.to_bytes(), "k-quant.gguf")
        .err()
        .expect("must fail");
    assert!(
        matches!(e, ModelError::UnsupportedTensorType { .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("Q4_K") && msg.contains(name) && msg.contains("k-quant.gguf"),
        "{msg}"
    );
}

#[test]
fn missing_tensor_is_named() {
    let mc = TinyConfig::default().model_config();
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != "model.norm.weight")
        .collect();
    let b = model_gguf(&mc, &tensors, DType::F32, &tiny_tokenizer::gguf_tokenizer());
    let e = Model::from_gguf_bytes(b.to_bytes(), "no-norm.gguf")
        .err()
        .expect("must fail");
    assert!(matches!(e, ModelError::MissingTensor { .. }), "{e:?}");
    assert!(
        e.to_string().contains("model.norm.weight") && e.to_string().contains("no-norm.gguf"),
        "{e}"
    );
}
