//! `testing::write_tiny_llama` HF folders load back through `Model::load` / `from_hf_bytes`
//! with identical tensors, config, tokenizer and chat template; output is seed-deterministic.

use std::collections::HashMap;
use std::path::PathBuf;

use half::f16;
use kiln_model::testing::{self, TinyConfig, tiny_tensors, tiny_tokenizer};
use kiln_model::{Architecture, ChatMessage, DType, Model};

fn tmp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kiln-tiny-{tag}-{}", std::process::id()))
}

fn check(tc: &TinyConfig, tag: &str) -> Model {
    let dir = tmp(tag);
    let cfg = testing::write_tiny_llama(&dir, tc, 42).unwrap();
    let m = Model::load(&dir).unwrap();
    assert_eq!(m.config, cfg);
    for t in tiny_tensors(&cfg, 42) {
        assert_eq!(m.weights.shape(&t.name).unwrap(), t.shape);
        let want: Vec<f32> = match tc.dtype {
            DType::F16 => t.data.iter().map(|&x| f16::from_f32(x).to_f32()).collect(),
            _ => t.data.clone(),
        };
        assert_eq!(m.weights.read_f32(&t.name).unwrap(), want, "{}", t.name);
        assert_eq!(m.weights.dtype(&t.name).unwrap(), tc.dtype);
    }
    std::fs::remove_dir_all(&dir).ok();
    m
}

#[test]
fn tiny_llama_f32_loads_identically() {
    let m = check(&TinyConfig::default(), "f32");
    assert!(m.weights.contains("lm_head.weight"));
    assert!(!m.weights.contains("model.layers.0.self_attn.q_proj.bias"));
    assert_eq!(m.config.architecture, Architecture::Llama);
    let msgs = [
        ChatMessage::new("system", "be brief"),
        ChatMessage::new("user", "hi"),
    ];
    let text = m
        .chat_template
        .as_ref()
        .unwrap()
        .render(&msgs, true)
        .unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = m.tokenizer.encode(&text, true).unwrap();
    assert_eq!(ids[0], m.tokenizer.token_to_id("<|im_start|>").unwrap());
    assert_eq!(m.tokenizer.decode(&ids, false).unwrap(), text);
    assert_eq!(
        m.tokenizer.decode(&ids, true).unwrap(),
        "system\nbe brief\nuser\nhi\nassistant\n"
    );
    assert_eq!(m.config.eos_token_ids, vec![tiny_tokenizer::eos_id()]);
    assert_eq!(
        m.tokenizer.id_to_token(tiny_tokenizer::eos_id()).as_deref(),
        Some("<|im_end|>")
    );
    assert!(m.config.param_count() > 0);
}

#[test]
fn tiny_qwen2_f16_tied_loads_identically() {
    let tc = TinyConfig {
        dtype: DType::F16,
        tie_word_embeddings: true,
        ..TinyConfig::qwen2()
    };
    let m = check(&tc, "qwen-f16");
    assert_eq!(m.config.architecture, Architecture::Qwen2);
    assert!(m.config.attention_bias && m.config.tie_word_embeddings);
    assert_eq!(
        m.weights
            .shape("model.layers.1.self_attn.k_proj.bias")
            .unwrap(),
        vec![32]
    );
    assert!(!m.weights.contains("lm_head.weight"));
}

#[test]
fn deterministic_per_seed_and_in_memory_loading() {
    let (a, b, c) = (tmp("seed-a"), tmp("seed-b"), tmp("seed-c"));
    let tc = TinyConfig::default();
    testing::write_tiny_llama(&a, &tc, 5).unwrap();
    testing::write_tiny_llama(&b, &tc, 5).unwrap();
    testing::write_tiny_llama(&c, &tc, 6).unwrap();
    let read = |d: &PathBuf| std::fs::read(d.join("model.safetensors")).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));

    let files: HashMap<String, Vec<u8>> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    let mem = Model::from_hf_bytes(files).unwrap();
    let disk = Model::load(&a).unwrap();
    assert_eq!(mem.config, disk.config);
    let name = "model.layers.1.mlp.down_proj.weight";
    assert_eq!(
        mem.weights.read_f32(name).unwrap(),
        disk.weights.read_f32(name).unwrap()
    );
    for d in [a, b, c] {
        std::fs::remove_dir_all(d).ok();
    }
}

#[test]
fn generation_config_sampling_defaults_load() {
    let tc = TinyConfig {
        generation: kiln_model::GenerationDefaults {
            temperature: Some(0.7),
            top_k: Some(50),
            repetition_penalty: Some(1.05),
            ..Default::default()
        },
        ..TinyConfig::default()
    };
    let m = check(&tc, "gen");
    assert_eq!(m.config.generation.temperature, Some(0.7));
}

/// A folder's files by name, as the browser hands them over.
fn files_of(dir: &PathBuf) -> HashMap<String, Vec<u8>> {
    (std::fs::read_dir(dir).unwrap())
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn a_sharded_folder_loads_as_one_file_does() {
    let (one, sharded) = (tmp("one"), tmp("sharded"));
    let tc = TinyConfig {
        dtype: DType::BF16,
        ..TinyConfig::default()
    };
    let cfg = testing::write_tiny_llama(&one, &tc, 9).unwrap();
    testing::write_tiny_llama_sharded(&sharded, &tc, 9, 3).unwrap();
    assert!(sharded.join("model-00003-of-00003.safetensors").exists());
    let want = Model::load(&one).unwrap();
    for got in [
        Model::load(&sharded).unwrap(),
        Model::from_hf_bytes(files_of(&sharded)).unwrap(),
    ] {
        assert_eq!(got.config, cfg);
        let mut names = got.weights.names();
        names.sort_unstable();
        let mut want_names = want.weights.names();
        want_names.sort_unstable();
        assert_eq!(names, want_names);
        for n in names {
            let w = want.weights.read_f32(n).unwrap();
            assert_eq!(got.weights.read_f32(n).unwrap(), w, "{n}");
        }
    }

    // A shard the index names but the folder lacks, by name.
    let second = sharded.join("model-00002-of-00003.safetensors");
    let bytes = std::fs::read(&second).unwrap();
    std::fs::remove_file(&second).unwrap();
    let err = Model::load(&sharded).err().unwrap().to_string();
    assert!(err.contains("model-00002-of-00003.safetensors"), "{err}");
    // A tensor in two shards (the first shard's copied over the second), by name and files.
    std::fs::copy(sharded.join("model-00001-of-00003.safetensors"), &second).unwrap();
    let err = Model::load(&sharded).err().unwrap().to_string();
    assert!(
        err.contains("is also in") && err.contains("model-00001-of-00003"),
        "{err}"
    );
    std::fs::write(&second, bytes).unwrap();
    assert!(Model::load(&sharded).is_ok());
    for d in [one, sharded] {
        std::fs::remove_dir_all(d).ok();
    }
}

/// Experts stacked in three dimensions load as each expert's matrices: Granite's files
/// (`block_sparse_moe.input_linear`, each expert's gate rows then its up rows; its shared
/// expert's gate and up in one matrix) and transformers 5's saved mixtures
/// (`mlp.experts.gate_up_proj`, `mlp.experts.down_proj`, no `.weight`).
#[test]
fn stacked_experts_load_as_each_experts_matrices() {
    let m = check(&TinyConfig::granite_moe(), "granite-moe");
    assert!(
        !m.weights
            .contains("model.layers.0.block_sparse_moe.input_linear.weight")
    );

    let dir = tmp("stacked-qwen3-moe");
    let cfg = testing::write_tiny_llama(&dir, &TinyConfig::qwen3_moe(), 5).unwrap();
    let tensors = tiny_tensors(&cfg, 5);
    let moe = cfg.moe.unwrap();
    let (h, ff) = (cfg.hidden_size, moe.intermediate_size);
    let get = |name: String| {
        tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .data
            .clone()
    };
    let mut stacked: Vec<testing::NamedTensor> = (tensors.iter())
        .filter(|t| !t.name.contains(".experts."))
        .cloned()
        .collect();
    for i in 0..cfg.num_layers {
        let e =
            |x: usize, k: &str| get(format!("model.layers.{i}.mlp.experts.{x}.{k}_proj.weight"));
        let gate_up = (0..moe.experts).flat_map(|x| [e(x, "gate"), e(x, "up")].concat());
        stacked.push(testing::NamedTensor {
            name: format!("model.layers.{i}.mlp.experts.gate_up_proj"),
            shape: vec![moe.experts, 2 * ff, h],
            data: gate_up.collect(),
        });
        stacked.push(testing::NamedTensor {
            name: format!("model.layers.{i}.mlp.experts.down_proj"),
            shape: vec![moe.experts, h, ff],
            data: (0..moe.experts).flat_map(|x| e(x, "down")).collect(),
        });
    }
    let bytes = testing::safetensors_bytes(&stacked, DType::F32);
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
    let m = Model::load(&dir).unwrap();
    for t in &tensors {
        assert_eq!(m.weights.shape(&t.name).unwrap(), t.shape, "{}", t.name);
        assert_eq!(m.weights.read_f32(&t.name).unwrap(), t.data, "{}", t.name);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The chat template from the files transformers reads it from: `chat_template.jinja` first
/// (what it saves now), then `tokenizer_config.json`'s `chat_template`, then a processor's
/// `chat_template.json` (multimodal folders); errors in it name the file it came from.
#[test]
fn chat_template_files_in_transformers_order() {
    let dir = tmp("chat-template-files");
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let source = |dir: &PathBuf| {
        let m = Model::load(dir).unwrap();
        m.chat_template.map(|t| t.source().to_string())
    };
    let from_config = source(&dir).expect("tokenizer_config.json's");
    std::fs::write(
        dir.join("chat_template.jinja"),
        "jinja {{ messages[0].content }}",
    )
    .unwrap();
    assert_eq!(source(&dir).unwrap(), "jinja {{ messages[0].content }}");
    std::fs::remove_file(dir.join("chat_template.jinja")).unwrap();
    assert_eq!(source(&dir).unwrap(), from_config);
    let cfg_path = dir.join("tokenizer_config.json");
    let mut tok_cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    tok_cfg.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(&cfg_path, tok_cfg.to_string()).unwrap();
    assert_eq!(source(&dir), None);
    let processor = serde_json::json!({"chat_template": "processor {{ bos_token }}"});
    std::fs::write(dir.join("chat_template.json"), processor.to_string()).unwrap();
    assert_eq!(source(&dir).unwrap(), "processor {{ bos_token }}");
    std::fs::write(dir.join("chat_template.jinja"), "{% if %}").unwrap();
    let e = Model::load(&dir).err().expect("must fail").to_string();
    assert!(e.contains("chat_template.jinja"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A multimodal folder laid out from tiny text model `tc`'s folder: its config.json made by
/// `wrap` from the text folder's, for each of `layouts` its tensors under `lm` in place of
/// `model.` and its head under `head` before `lm_head.`, beside a vision tower under
/// `vision`. It must read as the same model as the text folder (but for the BOS
/// id, `bos` where the wrapper's text config class has a default), and a missing tensor be
/// named as the folder names it. `kiln info` says it is a multimodal folder's language model.
fn check_multimodal(
    tag: &str,
    tc: &TinyConfig,
    wrap: impl Fn(serde_json::Value) -> serde_json::Value,
    layouts: &[(&str, &str, &str)],
    bos: Option<u32>,
) {
    let dir = tmp(tag);
    testing::write_tiny_llama(&dir, tc, 3).unwrap();
    let text = Model::load(&dir).unwrap();
    let tensors: Vec<testing::NamedTensor> = (text.weights.names().into_iter())
        .map(|n| testing::NamedTensor {
            name: n.to_string(),
            shape: text.weights.shape(n).unwrap(),
            data: text.weights.read_f32(n).unwrap(),
        })
        .collect();
    let text_config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    std::fs::write(dir.join("config.json"), wrap(text_config).to_string()).unwrap();
    for &(lm, head, vision) in layouts {
        let mut renamed: Vec<_> = (tensors.iter().cloned())
            .map(|mut t| {
                if let Some(rest) = t.name.strip_prefix("model.") {
                    t.name = format!("{lm}{rest}");
                } else if t.name.starts_with("lm_head.") {
                    t.name = format!("{head}{}", t.name);
                }
                t
            })
            .collect();
        renamed.push(testing::NamedTensor {
            name: format!("{vision}blocks.0.norm1.weight"),
            shape: vec![4],
            data: vec![1.0; 4],
        });
        let write = |t: &[testing::NamedTensor]| {
            let bytes = testing::safetensors_bytes(t, DType::F32);
            std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
            Model::load(&dir)
        };
        let model = write(&renamed).unwrap_or_else(|e| panic!("{tag} {lm}: {e}"));
        assert_eq!(model.config.bos_token_id, bos.or(text.config.bos_token_id));
        let wrapper = model
            .config
            .text_model_of
            .clone()
            .expect("a multimodal folder's");
        assert!(
            (model.config.features().iter()).any(|f| f.contains(&wrapper) && f.contains("vision")),
            "{tag}"
        );
        let config = kiln_model::ModelConfig {
            bos_token_id: text.config.bos_token_id,
            text_model_of: None,
            ..model.config.clone()
        };
        assert_eq!(config, text.config, "{tag} {lm}");
        for t in &tensors {
            assert_eq!(
                model.weights.read_f32(&t.name).unwrap(),
                t.data,
                "{lm}{}",
                t.name
            );
        }
        drop(model);
        let norm = format!("{lm}norm.weight");
        renamed.retain(|t| t.name != norm);
        let e = write(&renamed).err().expect("must fail").to_string();
        assert!(e.contains(&norm), "{e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Gemma 3's multimodal folders (`gemma3`, `Gemma3ForConditionalGeneration`): the text
/// folder's config under `text_config`, the tensors under `language_model.model.*` (the
/// released checkpoints, the vision tower under `vision_tower.`) or `model.language_model.*`
/// (transformers 5's, the vision tower under `model.vision_tower.`).
#[test]
fn multimodal_gemma3_folders_load_their_language_model() {
    let wrap = |text: serde_json::Value| {
        serde_json::json!({
            "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": text,
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 4},
        })
    };
    let layouts = [
        ("language_model.model.", "", "vision_tower.vision_model."),
        (
            "model.language_model.",
            "",
            "model.vision_tower.vision_model.",
        ),
    ];
    check_multimodal("gemma3-mm", &TinyConfig::gemma3(), wrap, &layouts, Some(2));
}

/// Qwen2.5-VL's (transformers 4's: the language model's keys at the top level, its tensors as
/// Qwen2's beside `visual.*`) and Qwen3-VL's (`text_config`, `model.language_model.*` beside
/// `model.visual.*`), both with their multimodal RoPE entries.
#[test]
fn multimodal_qwen_folders_load_their_language_model() {
    let mrope = serde_json::json!({"type": "mrope", "mrope_section": [2, 3, 3]});
    let wrap = |mut text: serde_json::Value| {
        text["model_type"] = "qwen2_5_vl".into();
        text["architectures"] = serde_json::json!(["Qwen2_5_VLForConditionalGeneration"]);
        text["rope_scaling"] = mrope.clone();
        text["vision_config"] = serde_json::json!({"depth": 1, "hidden_size": 4});
        text
    };
    let layouts = [("model.", "", "visual.")];
    check_multimodal(
        "qwen25vl-mm",
        &TinyConfig::qwen2(),
        wrap,
        &layouts,
        Some(151643),
    );
    let wrap = |mut text: serde_json::Value| {
        text["model_type"] = "qwen3_vl_text".into();
        text["rope_scaling"] = serde_json::json!({"mrope_interleaved": true,
            "mrope_section": [2, 3, 3], "rope_type": "default"});
        serde_json::json!({
            "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
            "text_config": text, "vision_config": {"depth": 1, "hidden_size": 4},
        })
    };
    let layouts = [("model.language_model.", "", "model.visual.")];
    check_multimodal("qwen3vl-mm", &TinyConfig::qwen3(), wrap, &layouts, None);
}

/// Mistral 3's multimodal folders (`mistral3`: Mistral Small 3.1 and 3.2): Mistral's layer
/// under `language_model.model.*`, its untied head under `language_model.lm_head.*`, beside
/// `vision_tower.*` (and transformers 5's layout); a text config of another kind
/// (Ministral 3's) or none is refused by name.
#[test]
fn multimodal_mistral3_folders_load_their_language_model() {
    let wrap = |mut text: serde_json::Value| {
        text["model_type"] = "mistral".into();
        serde_json::json!({
            "architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
            "text_config": text, "vision_config": {"model_type": "pixtral", "hidden_size": 4},
        })
    };
    let layouts = [
        ("language_model.model.", "language_model.", "vision_tower."),
        ("model.language_model.", "", "model.vision_tower."),
    ];
    let tc = TinyConfig {
        tie_word_embeddings: false,
        ..TinyConfig::default()
    };
    check_multimodal("mistral3-mm", &tc, wrap, &layouts, Some(1));
    let parse = |v: serde_json::Value| {
        kiln_model::ModelConfig::from_hf_json(&v.to_string(), "config.json")
            .expect_err("must fail")
            .to_string()
    };
    let ministral = serde_json::json!({"model_type": "mistral3",
        "text_config": {"model_type": "ministral3", "hidden_size": 64}});
    let e = parse(ministral);
    assert!(e.contains("mistral3") && e.contains("ministral3"), "{e}");
    let e = parse(serde_json::json!({"model_type": "mistral3"}));
    assert!(e.contains("no text_config"), "{e}");
}
