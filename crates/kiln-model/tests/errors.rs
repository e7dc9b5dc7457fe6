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

/// An MPT file whose q, k and v are clipped (`mpt.attention.clamp_kqv`, MPT's `clip_qkv`),
/// which kiln does not run: refused by name, where the same file without it loads.
#[test]
fn mpt_clipped_qkv_is_refused() {
    let mut b = f32_gguf(&TinyConfig::mpt());
    assert!(Model::from_gguf_bytes(b.to_bytes(), "mpt.gguf").is_ok());
    b.meta("mpt.attention.clamp_kqv", MetaValue::F32(6.0));
    let e = Model::from_gguf_bytes(b.to_bytes(), "mpt-clip.gguf")
        .err()
        .expect("must fail");
    assert!(
        e.to_string().contains("clamp_kqv") && e.to_string().contains("mpt-clip.gguf"),
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

/// A tensor the forward pass would not read (here a bias on o_proj, which no kiln kernel
/// adds) is refused by name: the model would otherwise run without it.
#[test]
fn tensor_kiln_would_not_read_is_refused_by_name() {
    let mut b = f32_gguf(&TinyConfig::default());
    assert!(Model::from_gguf_bytes(b.to_bytes(), "plain.gguf").is_ok());
    let bias: Vec<u8> = (0..64).flat_map(|_| 0.5f32.to_le_bytes()).collect();
    b.raw_tensor("blk.1.attn_output.bias", &[64], 0, bias);
    let e = Model::from_gguf_bytes(b.to_bytes(), "o-bias.gguf")
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("model.layers.1.self_attn.o_proj.bias") && msg.contains("o-bias.gguf"),
        "{msg}"
    );
}

/// A Command-R GGUF file with `attn_q_norm` reads as Command-R+ (LayerNorms of each head of q
/// and k), whose every layer needs both gains: one with layer 0's q gain alone names the
/// missing k gain and the file; the plain Command-R file loads.
#[test]
fn command_r_plus_without_its_k_norm_names_it() {
    let mut b = f32_gguf(&TinyConfig::cohere());
    let plain = Model::from_gguf_bytes(b.to_bytes(), "command-r.gguf").unwrap();
    assert!(!plain.config.qk_layer_norm);
    let gains: Vec<u8> = (0..4 * 16).flat_map(|_| 1f32.to_le_bytes()).collect();
    b.raw_tensor("blk.0.attn_q_norm.weight", &[16, 4], 0, gains);
    let e = Model::from_gguf_bytes(b.to_bytes(), "command-r-plus.gguf")
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("layers.0.self_attn.k_norm") && msg.contains("command-r-plus.gguf"),
        "{msg}"
    );
}

/// Configs that put biases where kiln runs none (ERNIE 4.5's `use_bias`, Llama's `mlp_bias`,
/// Seed-OSS's `attention_out_bias`) and a GGUF attention scale other than 1/sqrt(head_dim)
/// are refused by name; the plain ones load.
#[test]
fn biases_and_scales_kiln_does_not_run_are_refused() {
    let dir = tmp("bias-flags");
    for (cfg, key, flag) in [
        (TinyConfig::ernie45(), "use_bias", "ERNIE 4.5 with use_bias"),
        (TinyConfig::default(), "mlp_bias", "mlp_bias"),
        (
            TinyConfig::seed_oss(),
            "attention_out_bias",
            "attention_out_bias",
        ),
    ] {
        testing::write_tiny_llama(&dir, &cfg, 1).unwrap();
        let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v[key] = serde_json::json!(false);
        ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("without the bias");
        v[key] = serde_json::json!(true);
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err(key);
        assert!(e.to_string().contains(flag), "{e}");
    }
    std::fs::remove_dir_all(&dir).ok();

    let mut b = f32_gguf(&TinyConfig::seed_oss());
    // 1/sqrt(16), the head size's own scale, is what every graph runs.
    b.meta("seed_oss.attention.scale", MetaValue::F32(0.25));
    assert!(Model::from_gguf_bytes(b.to_bytes(), "seed.gguf").is_ok());
    b.meta("seed_oss.attention.scale", MetaValue::F32(0.125));
    let e = Model::from_gguf_bytes(b.to_bytes(), "seed-scaled.gguf")
        .err()
        .expect("must fail");
    assert!(e.to_string().contains("seed_oss.attention.scale"), "{e}");
}

/// A Qwen3 MoE config with dense MLP layers among its experts' (which kiln does not run) is
/// refused by name; its GGUF file with more experts a token than it has, or than kiln runs,
/// by the numbers.
#[test]
fn experts_kiln_does_not_run_are_refused() {
    let dir = tmp("moe");
    testing::write_tiny_llama(&dir, &TinyConfig::qwen3_moe(), 1).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("every layer's experts");
    for (key, value) in [
        ("mlp_only_layers", serde_json::json!([1])),
        ("decoder_sparse_step", serde_json::json!(2)),
    ] {
        let mut v = v.clone();
        v[key] = value;
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err(key);
        assert!(e.to_string().contains("dense MLP layers"), "{e}");
    }
    for used in [6, 17] {
        let mut b = f32_gguf(&TinyConfig::qwen3_moe());
        b.meta("qwen3moe.expert_used_count", MetaValue::U32(used));
        let e = Model::from_gguf_bytes(b.to_bytes(), "moe.gguf")
            .err()
            .expect("must fail");
        assert!(e.to_string().contains(&format!("{used} a token")), "{e}");
    }
}

/// The tensors of an f32 safetensors file.
fn f32_tensors(path: &std::path::Path) -> Vec<testing::NamedTensor> {
    let bytes = std::fs::read(path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    (file.tensors().into_iter())
        .map(|(name, t)| testing::NamedTensor {
            name,
            shape: t.shape().to_vec(),
            data: (t.data().chunks(4))
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        })
        .collect()
}

/// A StableLM 2 12B folder keeps each head's q/k LayerNorm gain as a tensor of its own; one
/// missing from a layer's set is named with the folder's file, not read as a shorter gain.
#[test]
fn stablelm2_12b_without_one_head_gain_names_it() {
    let dir = tmp("stablelm2-12b");
    testing::write_tiny_llama(&dir, &TinyConfig::stablelm2_12b(), 1).unwrap();
    Model::load(&dir).expect("the whole folder loads");
    let path = dir.join("model.safetensors");
    let all = f32_tensors(&path);
    let gone = "model.layers.1.self_attn.k_layernorm.norms.1.weight";
    let kept: Vec<_> = (all.iter().filter(|t| t.name != gone).cloned()).collect();
    assert_eq!(kept.len() + 1, all.len());
    std::fs::write(&path, testing::safetensors_bytes(&kept, DType::F32)).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.to_string().contains(gone), "{e}");
}

/// A GPT-NeoX folder is read under its own tensor names, which messages keep: one whose
/// `query_key_value` is not q, k and v of its heads, or that lacks a tensor, is refused naming
/// the tensor as the folder does.
#[test]
fn gpt_neox_folders_name_tensors_their_own_way() {
    let dir = tmp("gpt-neox");
    testing::write_tiny_llama(&dir, &TinyConfig::gpt_neox(), 1).unwrap();
    Model::load(&dir).expect("the whole folder loads");
    let path = dir.join("model.safetensors");
    let tensors = f32_tensors(&path);
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir).err().expect("must fail").to_string()
    };
    let qkv = "gpt_neox.layers.1.attention.query_key_value.weight";
    let short: Vec<_> = (tensors.iter().cloned())
        .map(|mut t| {
            if t.name == qkv {
                // Sixteen rows short: not q, k and v of four heads of 32.
                t.shape[0] -= 16;
                t.data.truncate(t.shape[0] * t.shape[1]);
            }
            t
        })
        .collect();
    let e = write(&short);
    assert!(e.contains(qkv) && e.contains("[368, 128]"), "{e}");
    let dense = "gpt_neox.layers.2.attention.dense.bias";
    let without: Vec<_> = (tensors.iter().filter(|t| t.name != dense).cloned()).collect();
    assert_eq!(without.len() + 1, tensors.len());
    let e = write(&without);
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains(dense), "{e}");
}

/// A GPT-2 checkpoint as `openai-community/gpt2` holds it: without the `transformer.` prefix,
/// with each layer's causal mask stored beside the weights (`h.N.attn.bias`, which changes
/// nothing), its products transposed (`Conv1D`, `[in, out]`). It reads as the folder kiln
/// writes does; a product stored the wrong way round is refused naming it as the folder does.
#[test]
fn gpt2_checkpoints_without_prefix_and_with_masks_load() {
    let dir = tmp("gpt2");
    testing::write_tiny_llama(&dir, &TinyConfig::gpt2(), 1).unwrap();
    let written = Model::load(&dir).expect("the whole folder loads");
    let names = [
        "model.layers.1.self_attn.qkv_proj.weight",
        "model.embed_positions.weight",
    ];
    let want = names.map(|n| written.weights.read_f32(n).unwrap());
    drop(written);
    let path = dir.join("model.safetensors");
    let tensors = f32_tensors(&path);
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir)
    };
    let mut bare: Vec<_> = (tensors.iter().cloned())
        .map(|mut t| {
            t.name = t.name.trim_start_matches("transformer.").to_string();
            t
        })
        .collect();
    for i in 0..3 {
        bare.push(testing::NamedTensor {
            name: format!("h.{i}.attn.bias"),
            shape: vec![1, 1, 4, 4],
            data: vec![1.0; 16],
        });
    }
    let model = write(&bare).expect("the bare checkpoint loads");
    for (name, want) in names.iter().zip(&want) {
        assert!(model.weights.read_f32(name).unwrap() == *want, "{name}");
    }
    assert_eq!(
        model
            .weights
            .shape("model.layers.2.mlp.down_proj.weight")
            .unwrap(),
        [128, 160]
    );
    drop(model);
    // `c_fc` stored as kiln runs it, `[out, in]`, not as `Conv1D` keeps it.
    let fc = "h.0.mlp.c_fc.weight";
    let turned: Vec<_> = (bare.iter().cloned())
        .map(|mut t| {
            if t.name == fc {
                t.shape.reverse();
            }
            t
        })
        .collect();
    let e = write(&turned).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains(fc), "{e}");
}

/// A GPT-J checkpoint as `EleutherAI/gpt-j-6b` holds it: each layer's causal mask and its
/// fill value stored beside the weights (`attn.bias`, `attn.masked_bias`), which change
/// nothing, so it loads; a tensor of another name there is refused by name.
#[test]
fn gptj_checkpoints_with_masks_load() {
    let dir = tmp("gptj");
    testing::write_tiny_llama(&dir, &TinyConfig::gptj(), 1).unwrap();
    let path = dir.join("model.safetensors");
    let mut tensors = f32_tensors(&path);
    let extra = |name: String| testing::NamedTensor {
        name,
        shape: vec![1],
        data: vec![-1e9],
    };
    for i in 0..3 {
        tensors.push(extra(format!("transformer.h.{i}.attn.bias")));
        tensors.push(extra(format!("transformer.h.{i}.attn.masked_bias")));
    }
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir)
    };
    drop(write(&tensors).expect("the checkpoint with its masks loads"));
    tensors.push(extra("transformer.h.0.attn.q_proj.bias".into()));
    let e = write(&tensors).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains("transformer.h.0.attn.q_proj.bias"), "{e}");
}

/// A BLOOM checkpoint as `bigscience/bloom-560m` holds it, without the `transformer.` prefix,
/// reads as the folder kiln writes (with the prefix) does; its messages name the tensors
/// without it too.
#[test]
fn bloom_checkpoints_without_prefix_load() {
    let dir = tmp("bloom");
    testing::write_tiny_llama(&dir, &TinyConfig::bloom(), 1).unwrap();
    let written = Model::load(&dir).expect("the whole folder loads");
    let qkv = "model.layers.2.self_attn.qkv_proj.weight";
    let want = written.weights.read_f32(qkv).unwrap();
    drop(written);
    let path = dir.join("model.safetensors");
    let bare: Vec<_> = (f32_tensors(&path).into_iter())
        .map(|mut t| {
            t.name = t.name.trim_start_matches("transformer.").to_string();
            t
        })
        .collect();
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir)
    };
    let model = write(&bare).expect("the bare checkpoint loads");
    assert!(model.weights.read_f32(qkv).unwrap() == want);
    drop(model);
    let norm = "word_embeddings_layernorm.bias";
    let without: Vec<_> = (bare.iter().filter(|t| t.name != norm).cloned()).collect();
    let e = write(&without).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains(&format!("\"{norm}\"")), "{e}");
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

/// GLM-4.5's files carry a multi-token-prediction layer after the last (GGUF: counted in
/// `block_count`, `nextn_predict_layers` saying how many): loaded past, not run. Its choice of
/// experts within groups, per-head q/k norms and a gating other than sigmoid are refused by
/// name.
#[test]
fn glm4_moe_prediction_layer_is_skipped_and_its_variants_refused() {
    let mut b = f32_gguf(&TinyConfig::glm4_moe());
    b.meta("glm4moe.block_count", MetaValue::U32(4))
        .meta("glm4moe.nextn_predict_layers", MetaValue::U32(1))
        .tensor(
            "blk.3.nextn.eh_proj.weight",
            &[64, 128],
            &[0.0; 64 * 128],
            DType::F32,
        )
        .tensor("blk.3.attn_norm.weight", &[64], &[1.0; 64], DType::F32);
    let m = Model::from_gguf_bytes(b.to_bytes(), "glm.gguf").expect("the MTP layer skipped");
    assert_eq!(m.config.num_layers, 3);
    b.meta("glm4moe.expert_gating_func", MetaValue::U32(1));
    let e = Model::from_gguf_bytes(b.to_bytes(), "glm.gguf")
        .err()
        .expect("softmax gating");
    assert!(e.to_string().contains("gating function 1"), "{e}");

    let dir = tmp("glm4moe");
    testing::write_tiny_llama(&dir, &TinyConfig::glm4_moe(), 1).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("GLM-4.5's own");
    for (key, value, says) in [
        ("topk_group", 1, "within 1 of 4 groups"),
        ("use_qk_norm", 2, "use_qk_norm true"),
    ] {
        let mut v = v.clone();
        v["n_group"] = serde_json::json!(4);
        v["topk_group"] = serde_json::json!(4);
        v[key] = match value {
            2 => serde_json::json!(true),
            n => serde_json::json!(n),
        };
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err(key);
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// Hunyuan's cross-layer attention (layers sharing K/V) is refused by name, in its dense and
/// its mixture-of-experts configs.
#[test]
fn hunyuan_cross_layer_attention_is_refused() {
    for tc in [TinyConfig::hunyuan_dense(), TinyConfig::hunyuan_moe()] {
        let dir = tmp("hunyuan-cla");
        testing::write_tiny_llama(&dir, &tc, 1).unwrap();
        let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("without");
        v["use_cla"] = serde_json::json!(true);
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err("use_cla");
        assert!(e.to_string().contains("use_cla"), "{e}");
    }
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
    // GGML type 16 is IQ2_XXS: 66 bytes per 256 elements.
    b.raw_tensor(
        "blk.0.ffn_down.weight",
        &[160, 64],
        16,
        vec![0u8; 160 * 64 / 256 * 66],
    );
    let e = Model::from_gguf_bytes(b.to_bytes(), "i-quant.gguf")
        .err()
        .expect("must fail");
    assert!(
        matches!(e, ModelError::UnsupportedTensorType { .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("IQ2_XXS") && msg.contains(name) && msg.contains("i-quant.gguf"),
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
