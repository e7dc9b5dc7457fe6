//! Each architecture's config.json as kiln reads it: Gemma 2's soft caps (and on any other
//! architecture, refused), SmolLM3's layers without RoPE, Phi-4-mini's partial rotary
//! embedding, Granite's multipliers and MiniCPM's, RoPE entries in transformers 5's
//! `rope_parameters`, YaRN's defaults, EXAONE 4's layer patterns; the LayerNorm families'
//! configs in [`layer_norm_families`], those of the families that name their keys their own
//! way in [`native_keys`].

mod layer_norm_families;
mod multimodal;
mod native_keys;

use kiln_model::{ModelConfig, RopeScaling, Yarn};

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
    assert_eq!(c.layer_rope(3).inv_freq, Vec::<f64>::new());
    assert_eq!(c.layer_rope(2).inv_freq.len(), 8);
    assert!(c.layer_rope(2).inv_freq[0] == 1.0);
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
    assert_eq!((c.rotary_dim(), c.layer_rope(0).inv_freq.len()), (12, 6));
    // Transformers 5 may keep it in `rope_parameters` alone.
    let mut v5 = cfg.clone();
    v5.as_object_mut().unwrap().remove("partial_rotary_factor");
    v5["rope_parameters"] =
        serde_json::json!({"rope_type": "default", "partial_rotary_factor": 0.75});
    assert_eq!(parse(&v5).unwrap(), c);
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

/// MiniCPM's multipliers worked out from its keys, on MiniCPM-2B's config.json: embeddings
/// times `scale_emb`, sub-layer outputs times `scale_depth / sqrt(layers)`, logits divided by
/// `hidden_size / dim_model_base`, the attention scale 1/sqrt(head_dim). MiniCPM4's LongRoPE
/// reads as Phi-3's; its mixture of experts and a scale that is not a positive number are
/// refused by name.
#[test]
fn minicpm_multipliers() {
    let mut cfg = serde_json::json!({
        "architectures": ["MiniCPMForCausalLM"], "model_type": "minicpm",
        "hidden_size": 2304, "intermediate_size": 5760, "num_hidden_layers": 40,
        "num_attention_heads": 36, "num_key_value_heads": 36, "vocab_size": 122753,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "hidden_act": "silu",
        "scale_emb": 12, "dim_model_base": 256, "scale_depth": 1.4, "tie_word_embeddings": true,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::MiniCpm);
    assert_eq!(
        (
            c.embed_scale(),
            c.attention_scale(),
            c.residual_scale(),
            c.logits_divisor()
        ),
        (12.0, 0.125, (1.4 / 40f64.sqrt()) as f32, 9.0)
    );
    assert!(c.tie_word_embeddings && c.rope_scaling.is_none());

    let mut v4 = cfg.clone();
    let factors: Vec<f64> = (0..32).map(|i| 1.0 + i as f64 / 8.0).collect();
    v4["max_position_embeddings"] = serde_json::json!(65536);
    v4["rope_scaling"] = serde_json::json!({
        "rope_type": "longrope", "long_factor": factors, "short_factor": factors,
        "original_max_position_embeddings": 32768,
    });
    v4["hidden_size"] = serde_json::json!(2048);
    v4["num_attention_heads"] = serde_json::json!(32);
    v4["num_key_value_heads"] = serde_json::json!(2);
    match parse(&v4).unwrap().rope_scaling {
        Some(RopeScaling::LongRope(r)) => {
            assert_eq!(r.original_max_position_embeddings, 32768);
            assert_eq!(r.long_factor.len(), 32);
        }
        other => panic!("LongRoPE expected, got {other:?}"),
    }

    let mut moe = cfg.clone();
    moe["num_experts"] = serde_json::json!(8);
    let e = parse(&moe).expect_err("must fail");
    assert!(
        e.to_string().contains("MiniCPM's mixture of experts"),
        "{e}"
    );
    cfg["dim_model_base"] = serde_json::json!(0);
    let e = parse(&cfg).expect_err("must fail");
    assert!(e.to_string().contains("dim_model_base 0"), "{e}");
}

/// Transformers 5 writes the RoPE base and scaling as one `rope_parameters` object (Gemma 3:
/// one per kind of layer); kiln reads them as it reads `rope_theta`, `rope_scaling` and
/// `rope_local_base_freq`. A scaling on Gemma 3's sliding layers, which kiln keeps unscaled,
/// is refused by name, as is a scaling type kiln does not run.
#[test]
fn rope_parameters_of_transformers_5() {
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let mut old = serde_json::json!({
        "model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 6, "num_attention_heads": 4, "vocab_size": 100,
        "sliding_window": 16, "rope_theta": 1000000.0, "rope_local_base_freq": 20000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    });
    let mut new = old.clone();
    for k in ["rope_theta", "rope_local_base_freq", "rope_scaling"] {
        new.as_object_mut().unwrap().remove(k);
    }
    new["rope_parameters"] = serde_json::json!({
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0},
    });
    let c = parse(&new).unwrap();
    assert_eq!(c, parse(&old).unwrap());
    assert_eq!(
        (c.rope_theta, c.rope_local_theta, c.rope_scaling),
        (1.0e6, Some(20000.0), Some(RopeScaling::Linear(8.0)))
    );
    new["rope_parameters"]["sliding_attention"]["rope_type"] = "yarn".into();
    let e = parse(&new).expect_err("a scaled sliding layer");
    assert!(
        e.to_string().contains("\"yarn\" on the sliding layers"),
        "{e}"
    );

    // One object for every layer (Qwen3's YaRN, as transformers 5 saves it).
    old["model_type"] = "qwen3".into();
    old["rope_scaling"] = serde_json::json!({
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
    });
    old["max_position_embeddings"] = 131072.into();
    let mut new = old.clone();
    new.as_object_mut().unwrap().remove("rope_scaling");
    new["rope_parameters"] = serde_json::json!({
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
    });
    let c = parse(&new).unwrap();
    assert_eq!(c, parse(&old).unwrap());
    new["rope_parameters"]["rope_type"] = "dynamic".into();
    let e = parse(&new).expect_err("dynamic NTK");
    assert!(e.to_string().contains("\"dynamic\""), "{e}");
}

/// A window as long as the context bounds nothing, but its layers are still sliding layers:
/// Gemma 3's turn at their own RoPE base (as in transformers, which keeps such a window).
#[test]
fn window_as_long_as_the_context() {
    let gemma3 = serde_json::json!({
        "model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 6, "num_attention_heads": 4, "vocab_size": 100,
        "max_position_embeddings": 512, "sliding_window": 512,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    });
    let c = ModelConfig::from_hf_json(&gemma3.to_string(), "config.json").unwrap();
    assert_eq!((c.layer_window(0), c.layer_window(5)), (Some(512), None));
    assert_eq!((c.layer_rope_theta(0), c.layer_rope_theta(5)), (1e4, 1e6));
    assert_eq!(c.layer_rope(0).inv_freq[1], 1e4f64.powf(-2.0 / 16.0));
}

/// YaRN's defaults as transformers fills them in: betas 32 and 1 (a 0 read as the default),
/// the factor on cos and sin 0.1 ln(factor) + 1, or DeepSeek's ratio of two such terms
/// (`mscale`, `mscale_all_dim`), the factor from the two contexts where the config gives
/// none, the original context the model's own where none is given.
#[test]
fn yarn_defaults() {
    let parse = |scaling: serde_json::Value| {
        let c = serde_json::json!({
            "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
            "max_position_embeddings": 4096, "rope_scaling": scaling,
        });
        match ModelConfig::from_hf_json(&c.to_string(), "config.json")
            .unwrap()
            .rope_scaling
        {
            Some(RopeScaling::Yarn(y)) => y,
            other => panic!("{other:?}"),
        }
    };
    let y = parse(serde_json::json!({
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "beta_fast": 0,
    }));
    let want = Yarn {
        factor: 4.0,
        original_max_position_embeddings: 1024,
        beta_fast: 32.0,
        beta_slow: 1.0,
        attention_factor: (0.1 * 4f64.ln() + 1.0) as f32,
        truncate: true,
    };
    assert_eq!(y, want);
    let y = parse(serde_json::json!({
        "rope_type": "yarn", "original_max_position_embeddings": 1024, "mscale": 0.707,
        "mscale_all_dim": 0.707 * 2.0, "truncate": false,
    }));
    let ratio = (0.1 * 0.707 * 4f64.ln() + 1.0) / (0.1 * 1.414 * 4f64.ln() + 1.0);
    assert_eq!((y.factor, y.truncate), (4.0, false));
    assert!((y.attention_factor as f64 - ratio).abs() < 1e-6);
    let y = parse(serde_json::json!({"rope_type": "yarn", "factor": 2.0}));
    assert_eq!(y.original_max_position_embeddings, 4096);
}

/// EXAONE 4's pattern as its configs spell it: a string of local layers ending in one global
/// ("LLLG": every 4th layer global, and those apply no RoPE), or a number; any other string
/// is refused by name. Without a window every layer is global and turns.
#[test]
fn exaone4_patterns() {
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let mut cfg = serde_json::json!({
        "model_type": "exaone4", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 8, "num_attention_heads": 4, "vocab_size": 100,
        "max_position_embeddings": 8192, "sliding_window": 1024, "sliding_window_pattern": "LLLG",
    });
    let c = parse(&cfg).unwrap();
    assert_eq!(
        (c.sliding_window, c.sliding_window_pattern),
        (Some(1024), Some(4))
    );
    assert_eq!(c.no_rope_layers, [3, 7]);
    cfg["sliding_window_pattern"] = 2.into();
    assert_eq!(parse(&cfg).unwrap().no_rope_layers, [1, 3, 5, 7]);
    cfg["sliding_window_pattern"] = "LGL".into();
    let e = parse(&cfg).expect_err("a global layer before local ones");
    assert!(e.to_string().contains("\"LGL\""), "{e}");
    cfg["sliding_window"] = serde_json::Value::Null;
    let c = parse(&cfg).unwrap();
    assert!(c.sliding_window.is_none() && c.no_rope_layers.is_empty());
}

/// InternLM2.5-7B-chat's config.json: Llama's keys, q, k and v one tensor in its folders, its
/// "dynamic" NTK scaling read as none (it changes the frequencies only past
/// `max_position_embeddings`, which bounds kiln's context), a linear one kept, and `bias`
/// (on `wqkv` and `wo`) refused by name.
#[test]
fn internlm2_config() {
    let cfg = serde_json::json!({
        "architectures": ["InternLM2ForCausalLM"], "attn_implementation": "eager", "bias": false,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
        "model_type": "internlm2", "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "pad_token_id": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"type": "dynamic", "factor": 2.0}, "rope_theta": 1000000,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
        "vocab_size": 92544,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::InternLm2);
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (32, 8, 128));
    assert_eq!((c.max_position_embeddings, c.rope_theta), (32768, 1e6));
    assert!(c.fused_qkv && !c.attention_bias && c.rope_scaling.is_none());
    let mut linear = cfg.clone();
    linear["rope_scaling"] = serde_json::json!({"type": "linear", "factor": 2.0});
    assert!(matches!(
        parse(&linear).unwrap().rope_scaling,
        Some(RopeScaling::Linear(_))
    ));
    let mut bad = cfg.clone();
    bad["bias"] = serde_json::json!(true);
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.contains("InternLM2 with bias"), "{e}");
}

/// EXAONE 3.5 2.4B's config.json: its own names of the layer count, epsilon and activation,
/// Llama 3's RoPE scaling, tied embeddings.
#[test]
fn exaone_config() {
    let cfg = serde_json::json!({
        "activation_function": "silu", "architectures": ["ExaoneForCausalLM"],
        "attention_dropout": 0.0, "bos_token_id": 1, "embed_dropout": 0.0, "eos_token_id": 361,
        "head_dim": 80, "hidden_size": 2560, "initializer_range": 0.02,
        "intermediate_size": 7168, "layer_norm_epsilon": 1e-05, "max_position_embeddings": 32768,
        "model_type": "exaone", "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_layers": 30, "pad_token_id": 0,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
        "vocab_size": 102400,
    });
    let c = ModelConfig::from_hf_json(&cfg.to_string(), "config.json").unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Exaone);
    assert_eq!(
        (c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim),
        (30, 32, 8, 80)
    );
    assert_eq!(
        (c.rms_norm_eps, c.eos_token_ids.as_slice()),
        (1e-5, &[361][..])
    );
    assert!(matches!(c.rope_scaling, Some(RopeScaling::Llama3(_))));
    assert!(c.tie_word_embeddings && !c.attention_bias);
    // Its class's defaults where a config leaves them out.
    let mut sparse = cfg.clone();
    for key in [
        "rope_theta",
        "num_key_value_heads",
        "max_position_embeddings",
    ] {
        sparse.as_object_mut().unwrap().remove(key);
    }
    let c = ModelConfig::from_hf_json(&sparse.to_string(), "config.json").unwrap();
    assert_eq!((c.rope_theta, c.num_kv_heads), (500_000.0, 8));
    assert_eq!(c.max_position_embeddings, 4096);
}
