//! Error reporting: each failure names the file and the offending thing.

use kiln_model::testing::{self, MetaValue, TinyConfig, model_gguf, tiny_tensors, tiny_tokenizer};
use kiln_model::{DType, Model, ModelConfig, ModelError};

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
        .replace("\"llama\"", "\"falcon\"");
    std::fs::write(&cfg_path, cfg).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    assert!(
        e.to_string().contains("falcon") && e.to_string().contains("config.json"),
        "{e}"
    );
    // Mistral's sliding window (every layer) loads; so does Qwen2's, on the layers from
    // `max_window_layers` (28 unless given) on.
    let cfg = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .replace("\"falcon\"", "\"mistral\"")
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

/// Soft caps are Gemma 2's: on another architecture they are a forward pass kiln does not
/// know, refused by name. A Gemma 2 config.json as Google ships gemma-2-2b-it (no
/// `layer_types`, no pattern) alternates sliding and global layers and keeps both caps.
#[test]
fn soft_caps_belong_to_gemma2() {
    let llama = serde_json::json!({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "final_logit_softcapping": 30.0,
    });
    let e = ModelConfig::from_hf_json(&llama.to_string(), "config.json").expect_err("must fail");
    assert!(
        e.to_string().contains("final_logit_softcapping") && e.to_string().contains("llama"),
        "{e}"
    );
    let gemma2 = serde_json::json!({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
        "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
        "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
        "intermediate_size": 9216, "max_position_embeddings": 8192,
        "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
        "sliding_window": 4096, "vocab_size": 256000, "eos_token_id": [1, 107],
    });
    let c = ModelConfig::from_hf_json(&gemma2.to_string(), "config.json").unwrap();
    assert_eq!((c.attn_softcap, c.final_softcap), (Some(50.0), Some(30.0)));
    assert_eq!(
        (0..4).map(|i| c.layer_window(i)).collect::<Vec<_>>(),
        [Some(4096), None, Some(4096), None]
    );
    assert_eq!((c.layer_rope_theta(0), c.layer_rope_theta(1)), (1e4, 1e4));
    assert!(c.tie_word_embeddings && c.norm_gain_offset == 1.0);
    assert_eq!(c.attention_scale(), 1.0 / 16.0);
    assert!((c.embed_scale() - 48.0).abs() < 1e-4);
    let features = c.features().join("; ");
    assert!(
        features.contains("attention scores soft-capped at 50")
            && features.contains("logits soft-capped at 30"),
        "{features}"
    );
    // A cap that is not a positive number is refused.
    let mut bad = gemma2.clone();
    bad["attn_logit_softcapping"] = serde_json::json!(0.0);
    let e = ModelConfig::from_hf_json(&bad.to_string(), "config.json").expect_err("must fail");
    assert!(e.to_string().contains("soft cap"), "{e}");
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
    // GGML type 10 is Q2_K: 84 bytes per 256 elements.
    b.raw_tensor(
        "blk.0.ffn_down.weight",
        &[160, 64],
        10,
        vec![0u8; 160 * 64 / 256 * 84],
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
        msg.contains("Q2_K") && msg.contains(name) && msg.contains("k-quant.gguf"),
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

/// A tiny model whose down projection is replaced by a raw tensor of the given type and bytes.
fn with_raw_down(dims: &[u64], ty: DType, data: Vec<u8>) -> Vec<u8> {
    let mc = TinyConfig::default().model_config();
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != "model.layers.0.mlp.down_proj.weight")
        .collect();
    let mut b = model_gguf(&mc, &[], DType::F32, &tiny_tokenizer::gguf_tokenizer());
    // The raw tensor first, so that another tensor's data follows it.
    b.raw_tensor("blk.0.ffn_down.weight", dims, ty.ggml_id(), data);
    for t in &tensors {
        let gname = kiln_model::gguf::names::hf_to_gguf_name(&t.name, mc.architecture);
        let data = match t.name.as_str() {
            n if n.ends_with("q_proj.weight") => {
                testing::permute_rows(&t.data, t.shape[0], mc.num_heads)
            }
            n if n.ends_with("k_proj.weight") => {
                testing::permute_rows(&t.data, t.shape[0], mc.num_kv_heads)
            }
            _ => t.data.clone(),
        };
        b.tensor(&gname, &t.shape, &data, DType::F32);
    }
    b.to_bytes()
}

#[test]
fn rows_not_whole_blocks_are_refused_by_name() {
    // 160 columns of Q4_K: not a whole number of 256-element super-blocks.
    let e = Model::from_gguf_bytes(
        with_raw_down(&[160, 64], DType::Q4_K, vec![0u8; 144 * 40]),
        "rows.gguf",
    )
    .err()
    .expect("must fail");
    assert!(matches!(e, ModelError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("blk.0.ffn_down.weight") && msg.contains("Q4_K") && msg.contains("256"),
        "{msg}"
    );
}

#[test]
fn tensor_shorter_than_its_type_and_shape_is_refused_by_name() {
    // (64, 160) Q8_0 needs 64 * 160 / 32 * 34 bytes; give 100 fewer.
    let need = DType::Q8_0.byte_len(64 * 160);
    let e = Model::from_gguf_bytes(
        with_raw_down(&[160, 64], DType::Q8_0, vec![0u8; need - 100]),
        "short.gguf",
    )
    .err()
    .expect("must fail");
    assert!(matches!(e, ModelError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("blk.0.ffn_down.weight")
            && msg.contains("Q8_0")
            && msg.contains(&need.to_string()),
        "{msg}"
    );
    // The same bytes at full length load.
    assert!(
        Model::from_gguf_bytes(
            with_raw_down(&[160, 64], DType::Q8_0, vec![0u8; need]),
            "ok.gguf"
        )
        .is_ok()
    );
}

/// SmolLM3's layers without RoPE: from its `no_rope_layers` flags (1 where a layer rotates),
/// or every `no_rope_layer_interval`th layer (4 unless given); a list of the wrong length or
/// with other values is refused by name.
#[test]
fn smollm3_layers_without_rope() {
    let mut cfg = serde_json::json!({
        "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3",
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 8,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
        "rope_theta": 5000000.0, "tie_word_embeddings": true,
        "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0], "no_rope_layer_interval": 4,
        "use_sliding_window": false, "sliding_window": null,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.no_rope_layers, [3, 7]);
    assert_eq!(c.layer_rope_inv_freq(3), vec![0.0; 8]);
    assert!(c.layer_rope_inv_freq(2)[0] == 1.0);
    assert!(
        c.features()
            .join("; ")
            .contains("no rotary embedding on layers 3, 7")
    );
    cfg["no_rope_layers"] = serde_json::json!([0, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(parse(&cfg).unwrap().no_rope_layers, [0]);
    cfg["no_rope_layers"] = serde_json::Value::Null;
    cfg["no_rope_layer_interval"] = serde_json::json!(3);
    assert_eq!(parse(&cfg).unwrap().no_rope_layers, [2, 5]);
    cfg["no_rope_layers"] = serde_json::json!([1, 1, 0]);
    let e = parse(&cfg).expect_err("must fail");
    assert!(e.to_string().contains("no_rope_layers"), "{e}");
}

/// A partial rotary embedding is Phi-3's (Phi-4-mini); on another family, or a factor that is
/// not a whole even number of a head's dimensions, it is refused by name.
#[test]
fn partial_rotary_embeddings() {
    let mut cfg = serde_json::json!({
        "model_type": "phi3", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "partial_rotary_factor": 0.75,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!((c.rotary_dim(), c.layer_rotated_pairs(0)), (12, 6));
    assert!(
        c.features()
            .join("; ")
            .contains("rotary embedding on 12 of 16 dimensions")
    );
    cfg["partial_rotary_factor"] = serde_json::json!(0.7);
    let e = parse(&cfg).expect_err("11.2 dimensions");
    assert!(e.to_string().contains("partial_rotary_factor 0.7"), "{e}");
    cfg["partial_rotary_factor"] = serde_json::json!(0.5);
    cfg["model_type"] = serde_json::json!("llama");
    let e = parse(&cfg).expect_err("not Phi-3's");
    assert!(
        e.to_string().contains("partial rotary embedding") && e.to_string().contains("llama"),
        "{e}"
    );
}

/// Granite's multipliers from its config.json (transformers' defaults of 1 where one is left
/// out, the attention multiplier replacing 1/sqrt(head_dim) outright); one that is not a
/// positive number is refused.
#[test]
fn granite_multipliers() {
    let mut cfg = serde_json::json!({
        "architectures": ["GraniteForCausalLM"], "model_type": "granite",
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
        "embedding_multiplier": 12.0, "attention_multiplier": 0.015625,
        "residual_multiplier": 0.22, "logits_scaling": 8.0, "tie_word_embeddings": true,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(
        (
            c.embed_scale(),
            c.attention_scale(),
            c.residual_scale(),
            c.logits_divisor()
        ),
        (12.0, 0.015625, 0.22, 8.0)
    );
    cfg.as_object_mut().unwrap().remove("attention_multiplier");
    assert_eq!(parse(&cfg).unwrap().attention_scale(), 1.0);
    cfg["logits_scaling"] = serde_json::json!(0.0);
    let e = parse(&cfg).expect_err("must fail");
    assert!(e.to_string().contains("Granite's multipliers"), "{e}");
}
