//! Architectures kiln refuses, each by name with the file: an unknown one (the message listing
//! those that run; Mistral's and Qwen2's windows load, a `layer_types` list that says otherwise
//! does not), GLM-4V's M-RoPE, GPT-J from GGUF, a gpt-oss folder; and a gpt-oss file without a
//! layer's sinks.

use kiln_model::testing::{self, MetaValue, TinyConfig, model_gguf, tiny_tensors, tiny_tokenizer};
use kiln_model::{DType, Model, ModelConfig, ModelError};

use super::{f32_gguf, tmp};

#[test]
fn unknown_architecture() {
    let mut b = f32_gguf(&TinyConfig::default());
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
    // The list of what runs names the architectures added over time too.
    for cfg in [
        TinyConfig::minicpm(),
        TinyConfig::cohere(),
        TinyConfig::cohere2(),
        TinyConfig::stablelm(),
        TinyConfig::nemotron(),
        TinyConfig::starcoder2(),
        TinyConfig::phi2(),
        TinyConfig::gpt_neox(),
        TinyConfig::falcon(),
        TinyConfig::gpt2(),
        TinyConfig::starcoder(),
        TinyConfig::bloom(),
        TinyConfig::mpt(),
        TinyConfig::gptj(),
        TinyConfig::internlm2(),
        TinyConfig::exaone(),
        TinyConfig::olmo(),
        TinyConfig::granite_moe(),
        TinyConfig::gpt_oss(),
        TinyConfig::qwen2_moe(),
        TinyConfig::glm4_moe(),
        TinyConfig::ernie45_moe(),
        TinyConfig::dots1(),
        TinyConfig::hunyuan_moe(),
    ] {
        let name = cfg.architecture.gguf_name();
        let listed = [',', ')'].map(|end| e.to_string().contains(&format!(" {name}{end}")));
        assert!(listed.contains(&true), "{name}: {e}");
    }

    let dir = tmp("arch");
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let cfg_path = dir.join("config.json");
    let cfg = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .replace("\"llama\"", "\"rwkv\"");
    std::fs::write(&cfg_path, cfg).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(
        e.to_string().contains("rwkv") && e.to_string().contains("config.json"),
        "{e}"
    );
    // Mistral's sliding window (every layer) loads; so does Qwen2's, on the layers from
    // `max_window_layers` (28 unless given) on.
    let cfg = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .replace("\"rwkv\"", "\"mistral\"")
        .replace(
            "\"torch_dtype\"",
            "\"sliding_window\": 128, \"torch_dtype\"",
        );
    std::fs::write(&cfg_path, &cfg).unwrap();
    let m = Model::load(&dir).expect("Mistral with a sliding window loads");
    assert_eq!(m.config.sliding_window, Some(128));
    let cfg = cfg.replace("\"mistral\"", "\"qwen2\"").replace(
        "\"torch_dtype\"",
        "\"use_sliding_window\": true, \"torch_dtype\"",
    );
    let qwen = |cfg: &str| ModelConfig::from_hf_json(cfg, "config.json");
    let c = qwen(&cfg).expect("Qwen2 with use_sliding_window loads");
    assert_eq!(
        c.sliding_window, None,
        "no layer reaches max_window_layers 28"
    );
    let cfg = cfg.replace(
        "\"torch_dtype\"",
        "\"max_window_layers\": 1, \"torch_dtype\"",
    );
    let c = qwen(&cfg).expect("Qwen2 sliding from layer 1 loads");
    assert_eq!(c.layer_window(0), None);
    assert_eq!(c.layer_window(1), Some(128));
    assert_eq!(c.every_layer_window(), None);
    // A `layer_types` list that says otherwise is refused, naming the field.
    let cfg = cfg.replace(
        "\"torch_dtype\"",
        "\"layer_types\": [\"sliding_attention\", \"full_attention\"], \"torch_dtype\"",
    );
    let e = qwen(&cfg).expect_err("must fail");
    assert!(e.to_string().contains("layer_types"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// GLM-4V's language model is a `glm4` file with M-RoPE sections, which kiln does not run:
/// refused by name, where the plain GLM-4 file loads.
#[test]
fn glm4v_mrope_is_refused() {
    let mut b = f32_gguf(&TinyConfig::glm4());
    assert!(Model::from_gguf_bytes(b.to_bytes(), "glm4.gguf").is_ok());
    let sections = [4, 2, 2, 0].map(MetaValue::I32).to_vec();
    b.meta("glm4.rope.dimension_sections", MetaValue::Array(sections));
    let e = Model::from_gguf_bytes(b.to_bytes(), "glm4v.gguf")
        .err()
        .expect("must fail");
    assert!(
        e.to_string().contains("dimension_sections") && e.to_string().contains("glm4v.gguf"),
        "{e}"
    );
}

/// A GGUF file naming `gptj`: llama.cpp's converter writes none and its graphs run none, so
/// kiln, which reads GPT-J from Hugging Face folders, refuses it by name.
#[test]
fn gptj_gguf_is_refused() {
    let b = f32_gguf(&TinyConfig::gptj());
    let e = Model::from_gguf_bytes(b.to_bytes(), "gptj.gguf")
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("GPT-J from GGUF") && msg.contains("gptj.gguf"),
        "{msg}"
    );
}

/// A gpt-oss folder is refused by name (kiln reads gpt-oss from GGUF); its GGUF file without
/// a layer's sinks is refused naming that tensor.
#[test]
fn gpt_oss_folders_and_files_without_sinks_are_refused() {
    let dir = tmp("gpt-oss");
    testing::write_tiny_llama(&dir, &TinyConfig::gpt_oss(), 1).unwrap();
    let e = Model::load(&dir).err().expect("a gpt-oss folder");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        e.to_string().contains("kiln reads gpt-oss from GGUF"),
        "{e}"
    );
    let mc = TinyConfig::gpt_oss().model_config();
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != "model.layers.1.self_attn.sinks")
        .collect();
    let b = model_gguf(&mc, &tensors, DType::F32, &tiny_tokenizer::gguf_tokenizer());
    let e = Model::from_gguf_bytes(b.to_bytes(), "gpt-oss.gguf")
        .err()
        .expect("must fail");
    assert!(
        e.to_string().contains("model.layers.1.self_attn.sinks"),
        "{e}"
    );
}
