//! GGUF writer → loader round trips: config, every tensor (all storage types, Q/K permutation
//! undone, in f32 and as raw blocks), tokenizer and chat template; plus in-memory loading.

use kiln_model::gguf::dequant::to_f32;
use kiln_model::testing::{self, TinyConfig, model_gguf, quantize, tiny_tensors, tiny_tokenizer};
use kiln_model::{Architecture, ChatMessage, DType, Llama3Rope, Model, RopeScaling};

fn check_round_trip(tc: &TinyConfig, dtype: DType) {
    let dir = std::env::temp_dir().join(format!(
        "kiln-gguf-rt-{}-{:?}-{:?}-{}",
        std::process::id(),
        tc.architecture,
        dtype,
        tc.tie_word_embeddings
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny.gguf");
    let cfg = testing::write_tiny_gguf(&path, tc, 7, dtype).unwrap();
    let m = Model::load(&path).unwrap();
    assert_eq!(m.config, cfg, "{dtype:?}");
    assert_eq!(m.source, path.display().to_string());
    for t in tiny_tensors(&cfg, 7) {
        assert_eq!(m.weights.shape(&t.name).unwrap(), t.shape, "{}", t.name);
        let got = m.weights.read_f32(&t.name).unwrap();
        let stored = if t.shape.len() == 1 {
            DType::F32
        } else {
            dtype
        };
        let want = to_f32(stored, &quantize(stored, &t.data));
        assert_eq!(got, want, "{} ({dtype:?})", t.name);
        // The raw blocks, rows un-permuted like the f32 values, decode to the same values.
        let (raw_type, raw) = m.weights.read_raw(&t.name).unwrap();
        assert_eq!(raw_type, stored, "{}", t.name);
        assert_eq!(to_f32(raw_type, &raw), got, "{} raw ({dtype:?})", t.name);
        let tol = match stored {
            DType::F32 => 0.0,
            DType::F16 => 1e-4,
            DType::Q8_0 => 2e-3,
            DType::Q6_K => 1e-2,
            // Eight levels a sub-block: half a step is an eighth of its largest magnitude.
            DType::Q3_K => 4e-2,
            // Four levels between a sub-block's minimum and maximum.
            DType::Q2_K => 8e-2,
            _ => 2e-2,
        };
        assert!(
            got.iter().zip(&t.data).all(|(a, b)| (a - b).abs() <= tol),
            "{} drifted",
            t.name
        );
    }
    assert_eq!(
        m.weights.contains("lm_head.weight"),
        !tc.tie_word_embeddings
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn llama_all_types_round_trip() {
    for dtype in [
        DType::F32,
        DType::F16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::MXFP4,
        DType::IQ4_NL,
    ] {
        check_round_trip(&TinyConfig::default(), dtype);
    }
}

#[test]
fn k_quants_round_trip() {
    // Rows of 256 (hidden) and 512 (intermediate) elements: whole K-quant super-blocks.
    let tc = TinyConfig {
        hidden_size: 256,
        intermediate_size: 512,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 64,
        ..Default::default()
    };
    for dtype in [
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::IQ4_XS,
    ] {
        check_round_trip(&tc, dtype);
    }
}

#[test]
fn qwen2_and_tied_round_trip() {
    check_round_trip(&TinyConfig::qwen2(), DType::Q8_0);
    check_round_trip(
        &TinyConfig {
            tie_word_embeddings: true,
            ..Default::default()
        },
        DType::Q4_1,
    );
}

#[test]
fn llama_qk_rows_are_unpermuted_on_read() {
    // The file really holds permuted rows: read the raw GGUF bytes back without the loader's fix.
    let mc = TinyConfig::default().model_config();
    let tensors = tiny_tensors(&mc, 3);
    let q = tensors
        .iter()
        .find(|t| t.name == "model.layers.0.self_attn.q_proj.weight")
        .unwrap();
    let bytes = model_gguf(&mc, &tensors, DType::F32, &tiny_tokenizer::gguf_tokenizer()).to_bytes();
    let m = Model::from_gguf_bytes(bytes.clone(), "tiny.gguf").unwrap();
    assert_eq!(m.weights.read_f32(&q.name).unwrap(), q.data);
    let permuted = testing::permute_rows(&q.data, q.shape[0], mc.num_heads);
    let needle: Vec<u8> = permuted[..64]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert!(
        bytes.windows(needle.len()).any(|w| w == needle.as_slice()),
        "file should hold permuted rows"
    );
}

#[test]
fn gguf_tokenizer_and_template_match_hf_folder() {
    let dir = std::env::temp_dir().join(format!("kiln-gguf-tok-{}", std::process::id()));
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let hf = Model::load(&dir).unwrap();
    let gg = Model::from_gguf_bytes(
        testing::model_gguf(
            &hf.config,
            &tiny_tensors(&hf.config, 1),
            DType::F16,
            &tiny_tokenizer::gguf_tokenizer(),
        )
        .to_bytes(),
        "mem.gguf",
    )
    .unwrap();
    assert_eq!(gg.source, "mem.gguf");
    for s in [
        "the cat is in the ring",
        "  two  spaces\n\nnewlines",
        "<|im_start|>user\nhello<|im_end|>",
        "ünïcödé 12345",
    ] {
        let a = hf.tokenizer.encode(s, true).unwrap();
        assert_eq!(a, gg.tokenizer.encode(s, true).unwrap(), "{s:?}");
        assert_eq!(gg.tokenizer.decode(&a, false).unwrap(), s);
    }
    assert!(
        hf.tokenizer.encode(" the", false).unwrap().len() == 1,
        "merges are applied"
    );
    let eos = tiny_tokenizer::eos_id();
    assert!(gg.tokenizer.is_special(eos) && hf.tokenizer.is_special(eos));
    assert_eq!(gg.config.eos_token_ids, vec![eos]);
    let msgs = [ChatMessage::new("user", "hi")];
    let a = hf
        .chat_template
        .as_ref()
        .unwrap()
        .render(&msgs, true)
        .unwrap();
    assert_eq!(a, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    assert_eq!(
        gg.chat_template
            .as_ref()
            .unwrap()
            .render(&msgs, true)
            .unwrap(),
        a
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn llama3_rope_scaling_round_trip() {
    let mut mc = TinyConfig::default().model_config();
    mc.rope_scaling = Some(RopeScaling::Llama3(Llama3Rope {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 64,
    }));
    mc.rope_theta = 500000.0;
    let bytes = model_gguf(
        &mc,
        &tiny_tensors(&mc, 2),
        DType::F32,
        &tiny_tokenizer::gguf_tokenizer(),
    )
    .to_bytes();
    let m = Model::from_gguf_bytes(bytes, "rope.gguf").unwrap();
    assert_eq!(m.config.rope_scaling, mc.rope_scaling);
    assert_eq!(m.config.architecture, Architecture::Llama);
    let plain = {
        let mut c = mc.clone();
        c.rope_scaling = None;
        c.layer_rope(0).inv_freq
    };
    let scaled = m.config.layer_rope(0).inv_freq;
    assert_eq!(scaled.len(), 8);
    assert_eq!(scaled[0], plain[0], "high frequencies unchanged");
    assert!(
        (scaled[7] - plain[7] / 8.0).abs() < 1e-9,
        "low frequencies divided by factor"
    );
}

#[test]
fn sampling_defaults_round_trip() {
    let tc = TinyConfig {
        generation: kiln_model::GenerationDefaults {
            temperature: Some(0.6),
            top_p: Some(0.95),
            top_k: Some(20),
            min_p: Some(0.05),
            repetition_penalty: Some(1.1),
        },
        ..TinyConfig::default()
    };
    check_round_trip(&tc, DType::F16);
}

/// EXAONE 4 as llama.cpp reads its files: windows only on the 64-layer (32B) size, 4096
/// positions unless the file gives a window, every 4th layer global and without RoPE; other
/// sizes global throughout, every layer turning.
#[test]
fn exaone4_windows_follow_llama_cpp() {
    let load = |num_layers: usize, window: Option<usize>| {
        let tc = TinyConfig {
            architecture: Architecture::Exaone4,
            hidden_size: 32,
            intermediate_size: 32,
            num_heads: 2,
            num_kv_heads: 1,
            num_layers,
            sliding_window: window,
            ..TinyConfig::default()
        };
        let mc = tc.model_config();
        let bytes = model_gguf(
            &mc,
            &tiny_tensors(&mc, 3),
            DType::F32,
            &tiny_tokenizer::gguf_tokenizer(),
        )
        .to_bytes();
        Model::from_gguf_bytes(bytes, "exaone4.gguf")
            .unwrap()
            .config
    };
    let c = load(64, None);
    assert_eq!(
        (c.sliding_window, c.sliding_window_pattern),
        (Some(4096), Some(4))
    );
    assert_eq!(c.no_rope_layers, (3..64).step_by(4).collect::<Vec<_>>());
    assert_eq!((c.layer_window(2), c.layer_window(3)), (Some(4096), None));
    assert_eq!(load(64, Some(1024)).sliding_window, Some(1024));
    let c = load(30, Some(1024));
    assert_eq!((c.sliding_window, c.no_rope_layers.len()), (None, 0));
}

/// gpt-oss's vocabulary (o200k_harmony): its replies stop at `<|return|>` or `<|call|>`, not
/// at the `<|end|>` the file names its end of turn (a message ends there, its reasoning, and
/// the reply goes on to its answer), and its message markers stay in decoded text, where
/// `<|return|>` is skipped as any special token is.
#[test]
fn gpt_oss_vocabulary_stops_at_return_and_keeps_its_markers() {
    let mc = TinyConfig::gpt_oss().model_config();
    let mut tok = tiny_tokenizer::gguf_tokenizer();
    let markers = [
        "<|start|>",
        "<|channel|>",
        "<|message|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<|constrain|>",
    ];
    let first = tok.tokens.len() as u32;
    for m in markers {
        tok.tokens.push(m.into());
        tok.token_types.push(3);
    }
    let id = |m: &str| first + markers.iter().position(|x| *x == m).unwrap() as u32;
    let mut b = model_gguf(&mc, &tiny_tensors(&mc, 1), DType::F32, &tok);
    b.meta(
        "tokenizer.ggml.eot_token_id",
        kiln_model::testing::MetaValue::U32(id("<|end|>")),
    );
    let m = Model::from_gguf_bytes(b.to_bytes(), "gpt-oss.gguf").unwrap();
    let stops = &m.config.eos_token_ids;
    assert!(!stops.contains(&id("<|end|>")), "{stops:?}");
    for s in [tiny_tokenizer::eos_id(), id("<|return|>"), id("<|call|>")] {
        assert!(stops.contains(&s), "{s} not in {stops:?}");
    }
    let text = "<|start|>assistant<|channel|>final<|message|>hi<|end|>";
    let ids = m.tokenizer.encode(text, false).unwrap();
    assert!(ids.contains(&id("<|channel|>")) && ids.contains(&id("<|end|>")));
    let reply = [&ids[..], &[id("<|return|>")]].concat();
    assert_eq!(m.tokenizer.decode(&reply, true).unwrap(), text);
    // Without the harmony vocabulary the same kind of token is skipped.
    let plain = model_gguf(
        &mc,
        &tiny_tensors(&mc, 1),
        DType::F32,
        &tiny_tokenizer::gguf_tokenizer(),
    );
    let m = Model::from_gguf_bytes(plain.to_bytes(), "plain.gguf").unwrap();
    let eos = tiny_tokenizer::eos_id();
    assert_eq!(m.tokenizer.decode(&[eos], true).unwrap(), "");
}

/// Qwen2-VL's and Qwen2.5-VL's language model (`qwen2vl`) and Qwen3-VL's (`qwen3vl`), as
/// llama.cpp's converter writes them beside their vision tower's file: Qwen2's and Qwen3's
/// tensors and keys with multimodal RoPE sections, which turn a text token's pairs by its one
/// position in every section, as plain RoPE does. They read as the same models.
#[test]
fn qwen_vl_language_models_read_as_qwen() {
    for (tc, arch) in [
        (TinyConfig::qwen2(), "qwen2vl"),
        (TinyConfig::qwen3(), "qwen3vl"),
    ] {
        let mc = tc.model_config();
        let mut b = model_gguf(
            &mc,
            &tiny_tensors(&mc, 7),
            DType::F32,
            &tiny_tokenizer::gguf_tokenizer(),
        );
        let plain = Model::from_gguf_bytes(b.to_bytes(), "plain.gguf").unwrap();
        b.rename_architecture(arch);
        let sections = [2, 3, 3, 0].map(testing::MetaValue::I32);
        b.meta(
            &format!("{arch}.rope.dimension_sections"),
            testing::MetaValue::Array(sections.to_vec()),
        );
        let vl = Model::from_gguf_bytes(b.to_bytes(), "vl.gguf").unwrap();
        assert_eq!(vl.config.text_model_of.as_deref(), Some(arch));
        let config = kiln_model::ModelConfig {
            text_model_of: None,
            ..vl.config.clone()
        };
        assert_eq!(config, plain.config, "{arch}");
        for name in plain.weights.names() {
            assert_eq!(
                vl.weights.read_f32(name).unwrap(),
                plain.weights.read_f32(name).unwrap(),
                "{arch} {name}"
            );
        }
    }
}
