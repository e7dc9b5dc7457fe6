//! Each architecture's config.json as kiln reads it: Gemma 2's soft caps (and on any other
//! architecture, refused), SmolLM3's layers without RoPE, Phi-4-mini's partial rotary
//! embedding, Granite's multipliers and MiniCPM's, Cohere's, StableLM's, Nemotron's,
//! StarCoder2's and Phi-2's configs, RoPE entries in transformers 5's `rope_parameters`,
//! YaRN's defaults.

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

/// Cohere's Command-R as its config.json has it: its LayerNorm's epsilon by that name, its
/// context from `model_max_length` (128k) rather than `max_position_embeddings` (8192), the
/// logits multiplied by `logit_scale`, embeddings tied unless it says; Command-R+'s LayerNorms
/// of q and k read from `use_qk_norm` (on Command R7B's `cohere2`, which has none, refused by
/// name).
#[test]
fn cohere_config() {
    let mut cfg = serde_json::json!({
        "architectures": ["CohereForCausalLM"], "model_type": "cohere",
        "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40,
        "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 256000,
        "max_position_embeddings": 8192, "model_max_length": 131072,
        "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "rope_theta": 8000000.0,
        "use_qk_norm": false, "hidden_act": "silu",
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Cohere);
    assert_eq!(
        (
            c.max_position_embeddings,
            c.rms_norm_eps,
            c.logits_divisor()
        ),
        (131072, 1e-5, 16.0)
    );
    assert!(c.tie_word_embeddings && c.architecture.layer_norm());
    assert!(c.features().iter().any(|f| f.contains("LayerNorm")));
    assert!(!c.qk_layer_norm);
    cfg["use_qk_norm"] = serde_json::json!(true);
    assert!(parse(&cfg).unwrap().qk_layer_norm);

    // Command R7B: a window of 4096 where the config leaves it out, every fourth layer global
    // and without RoPE; without a window no layer would turn, which is refused.
    let mut r7b = serde_json::json!({
        "architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2",
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 256000,
        "max_position_embeddings": 8192, "layer_norm_eps": 1e-05, "logit_scale": 0.25,
        "sliding_window_pattern": 4,
    });
    let c = parse(&r7b).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Cohere2);
    assert_eq!((c.layer_window(2), c.layer_window(3)), (Some(4096), None));
    assert_eq!(c.no_rope_layers, (3..32).step_by(4).collect::<Vec<_>>());
    assert_eq!(c.logits_divisor(), 4.0);
    let mut qk = r7b.clone();
    qk["use_qk_norm"] = serde_json::json!(true);
    let e = parse(&qk).expect_err("must fail");
    assert!(e.to_string().contains("use_qk_norm"), "{e}");
    r7b["sliding_window"] = serde_json::Value::Null;
    let e = parse(&r7b).expect_err("must fail");
    assert!(e.to_string().contains("without a sliding window"), "{e}");
}

/// StableLM 2 1.6B's config.json: LayerNorms with biases, q/k/v biases from `use_qkv_bias`,
/// a quarter of each head turning (its factor given, or 0.25 when left out); StableLM 2
/// 12B's q/k LayerNorms and attention and MLP side by side read from their flags.
#[test]
fn stablelm_config() {
    let mut cfg = serde_json::json!({
        "architectures": ["StableLmForCausalLM"], "model_type": "stablelm",
        "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 100352,
        "max_position_embeddings": 4096, "layer_norm_eps": 1e-05, "rope_theta": 10000,
        "partial_rotary_factor": 0.25, "use_qkv_bias": true, "qk_layernorm": false,
        "use_parallel_residual": false, "tie_word_embeddings": false, "hidden_act": "silu",
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::StableLm);
    assert_eq!((c.partial_rotary_dim, c.attention_bias), (Some(16), true));
    assert!(c.architecture.layer_norm() && c.architecture.norm_bias());
    assert!(
        c.features()
            .contains(&"LayerNorms (with biases) in place of RMSNorms".into())
    );
    cfg.as_object_mut().unwrap().remove("partial_rotary_factor");
    assert_eq!(parse(&cfg).unwrap().partial_rotary_dim, Some(16));
    assert!(!c.qk_layer_norm && !c.parallel_residual);
    cfg["qk_layernorm"] = serde_json::json!(true);
    cfg["use_parallel_residual"] = serde_json::json!(true);
    let c = parse(&cfg).unwrap();
    assert!(c.qk_layer_norm && c.parallel_residual);
    assert!(c.features().contains(
        &"one LayerNorm (with biases) before attention and the MLP, which run side by side".into()
    ));
    let t = kiln_model::ModelTensors::for_config(&c);
    let names: Vec<_> = t.all().iter().map(|t| t.name.clone()).collect();
    assert!(names.contains(&"model.layers.0.self_attn.k_norm.weight".into()));
    assert!(!names.iter().any(|n| n.contains("post_attention_layernorm")));
}

/// Nemotron-Mini-4B's config.json: `norm_eps`, LayerNorm gains stored minus one, half of each
/// head turning (given, or 0.5 when left out), relu(x)^2; its `attention_bias` (a bias on
/// o_proj too) is refused by name.
#[test]
fn nemotron_config() {
    let mut cfg = serde_json::json!({
        "architectures": ["NemotronForCausalLM"], "model_type": "nemotron",
        "hidden_size": 3072, "intermediate_size": 9216, "num_hidden_layers": 32,
        "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 256000, "max_position_embeddings": 4096, "norm_eps": 1e-05,
        "partial_rotary_factor": 0.5, "hidden_act": "relu2", "rope_theta": 10000,
        "tie_word_embeddings": false,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Nemotron);
    assert_eq!(
        (c.partial_rotary_dim, c.norm_gain_offset, c.rms_norm_eps),
        (Some(64), 1.0, 1e-5)
    );
    assert_eq!(c.activation, kiln_model::Activation::Relu2);
    cfg.as_object_mut().unwrap().remove("partial_rotary_factor");
    assert_eq!(parse(&cfg).unwrap().partial_rotary_dim, Some(64));
    cfg["attention_bias"] = serde_json::json!(true);
    let e = parse(&cfg).expect_err("must fail");
    assert!(e.to_string().contains("attention_bias"), "{e}");
}

/// StarCoder2-3B's config.json: `norm_epsilon`, biases everywhere from `use_bias`, GELU
/// without a gate, a window on every layer, tied embeddings.
#[test]
fn starcoder2_config() {
    let cfg = serde_json::json!({
        "architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2",
        "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
        "num_attention_heads": 24, "num_key_value_heads": 2, "vocab_size": 49152,
        "max_position_embeddings": 16384, "norm_epsilon": 1e-05, "rope_theta": 999999.4,
        "sliding_window": 4096, "use_bias": true, "hidden_act": "gelu_pytorch_tanh",
    });
    let c = ModelConfig::from_hf_json(&cfg.to_string(), "config.json").unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Starcoder2);
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    assert_eq!((c.layer_window(29), c.rms_norm_eps), (Some(4096), 1e-5));
    assert!(c.attention_bias && c.tie_word_embeddings);
}

/// Pythia's config.json (pythia-160m): GPT-NeoX's own keys for the RoPE base and the share
/// of each head that turns (`rotary_emb_base`, `rotary_pct`: 16 of 64 dimensions), exact GELU,
/// attention and the MLP side by side, biases, q/k/v fused, an untied LM head; without
/// `use_parallel_residual` the sub-layers run one after the other; transformers 5's
/// `rope_parameters` say the same.
#[test]
fn gpt_neox_config() {
    let mut cfg = serde_json::json!({
        "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
        "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu", "hidden_size": 768,
        "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
        "max_position_embeddings": 2048, "num_attention_heads": 12, "num_hidden_layers": 12,
        "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": false,
        "torch_dtype": "float16", "use_cache": true, "use_parallel_residual": true,
        "vocab_size": 50304,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::GptNeox);
    assert_eq!(c.activation, kiln_model::Activation::Gelu);
    assert_eq!((c.head_dim, c.partial_rotary_dim), (64, Some(16)));
    assert_eq!((c.num_kv_heads, c.rope_theta), (12, 10000.0));
    assert!(c.attention_bias && c.fused_qkv && c.parallel_residual && !c.tie_word_embeddings);
    assert_eq!((c.rms_norm_eps, c.max_position_embeddings), (1e-5, 2048));
    assert!(
        c.features().iter().any(|f| f.contains("GELU (exact")),
        "{:?}",
        c.features()
    );
    cfg["use_parallel_residual"] = serde_json::json!(false);
    cfg["rotary_emb_base"] = serde_json::json!(500);
    let c = parse(&cfg).unwrap();
    assert!(!c.parallel_residual);
    assert_eq!(c.rope_theta, 500.0);
    // As transformers 5 saves it: the RoPE keys in `rope_parameters`.
    let obj = cfg.as_object_mut().unwrap();
    obj.remove("rotary_emb_base");
    obj.remove("rotary_pct");
    cfg["rope_parameters"] = serde_json::json!({
        "rope_theta": 2000.0, "rope_type": "default", "partial_rotary_factor": 0.5,
    });
    let c = parse(&cfg).unwrap();
    assert_eq!((c.rope_theta, c.partial_rotary_dim), (2000.0, Some(32)));
    // Without its share given, a quarter of each head turns.
    cfg.as_object_mut().unwrap().remove("rope_parameters");
    assert_eq!(parse(&cfg).unwrap().partial_rotary_dim, Some(16));
}

/// Falcon's config.json as its three shapes have it: 7B's multi-query attention on one
/// LayerNorm (its MLP four times as wide as the hidden size, exact GELU, tied embeddings),
/// 40B's grouped attention (`num_kv_heads` with `new_decoder_architecture`) on two, Falcon 2
/// 11B's grouped attention on one (`num_ln_in_parallel_attn`). ALiBi, sub-layers one after
/// the other and a residual taken after the LayerNorm are refused by name.
#[test]
fn falcon_config() {
    let mut cfg = serde_json::json!({
        "alibi": false, "apply_residual_connection_post_layernorm": false,
        "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0, "bias": false,
        "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0, "hidden_size": 4544,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
        "multi_query": true, "new_decoder_architecture": false, "num_attention_heads": 71,
        "num_hidden_layers": 32, "parallel_attn": true, "torch_dtype": "bfloat16",
        "use_cache": true, "vocab_size": 65024,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Falcon);
    assert_eq!(c.activation, kiln_model::Activation::Gelu);
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (71, 1, 64));
    assert_eq!(
        (c.intermediate_size, c.max_position_embeddings),
        (18176, 2048)
    );
    assert!(c.parallel_residual && !c.mlp_norm && c.fused_qkv && c.tie_word_embeddings);
    assert!(!c.attention_bias && c.partial_rotary_dim.is_none());
    assert_eq!((c.rms_norm_eps, c.rope_theta), (1e-5, 10000.0));
    // 40B.
    cfg["hidden_size"] = serde_json::json!(8192);
    cfg["num_attention_heads"] = serde_json::json!(128);
    cfg["num_kv_heads"] = serde_json::json!(8);
    cfg["new_decoder_architecture"] = serde_json::json!(true);
    let c = parse(&cfg).unwrap();
    assert_eq!(
        (c.num_kv_heads, c.head_dim, c.intermediate_size),
        (8, 64, 32768)
    );
    assert!(c.mlp_norm);
    // Falcon 2 11B.
    cfg["hidden_size"] = serde_json::json!(4096);
    cfg["num_attention_heads"] = serde_json::json!(32);
    cfg["num_ln_in_parallel_attn"] = serde_json::json!(1);
    cfg["ffn_hidden_size"] = serde_json::json!(16384);
    cfg["rope_theta"] = serde_json::json!(500042.0);
    cfg["tie_word_embeddings"] = serde_json::json!(false);
    let c = parse(&cfg).unwrap();
    assert_eq!(
        (c.num_kv_heads, c.head_dim, c.intermediate_size),
        (8, 128, 16384)
    );
    assert!(!c.mlp_norm && !c.tie_word_embeddings);
    assert_eq!(c.rope_theta, 500042.0);
    for (key, value, named) in [
        ("alibi", true, "ALiBi"),
        ("parallel_attn", false, "one after the other"),
        (
            "apply_residual_connection_post_layernorm",
            true,
            "after the LayerNorm",
        ),
    ] {
        let mut bad = cfg.clone();
        bad[key] = serde_json::json!(value);
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("Falcon") && e.contains(named), "{key}: {e}");
    }
}

/// GPT-2's config.json (`openai-community/gpt2`): its own names of the sizes (`n_embd`,
/// `n_head`, `n_layer`, `n_positions`; `n_inner` null: four times the hidden size),
/// `gelu_new`, biases on every product, q/k/v fused, tied embeddings, learned positions and
/// no rotary embedding. Its options that change the forward pass are refused by name.
#[test]
fn gpt2_config() {
    let cfg = serde_json::json!({
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12,
        "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
        "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
        "vocab_size": 50257,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Gpt2);
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    assert_eq!((c.hidden_size, c.intermediate_size), (768, 3072));
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (12, 12, 64));
    assert_eq!((c.num_layers, c.max_position_embeddings), (12, 1024));
    assert!(c.attention_bias && c.fused_qkv && c.tie_word_embeddings && !c.parallel_residual);
    assert!(c.layer_rope(0).inv_freq.is_empty() && c.rms_norm_eps == 1e-5);
    assert!(
        c.features()
            .iter()
            .any(|f| f.contains("learned position embeddings (1024")),
        "{:?}",
        c.features()
    );
    for (key, value, named) in [
        ("scale_attn_weights", false, "not scaled"),
        ("scale_attn_by_inverse_layer_idx", true, "layer's number"),
        ("add_cross_attention", true, "cross-attention"),
    ] {
        let mut bad = cfg.clone();
        bad[key] = serde_json::json!(value);
        let e = parse(&bad).unwrap_err().to_string();
        assert!(
            e.contains("gpt2") && e.contains(named) && e.contains(key),
            "{key}: {e}"
        );
    }
}

/// StarCoder's config.json (`bigcode/starcoderbase-1b`, `gpt_bigcode`): multi-query
/// attention (one KV head) unless `multi_query` is false, `gelu_pytorch_tanh`, its MLP's
/// width given (`n_inner`), 8192 learned positions.
#[test]
fn starcoder_config() {
    let mut cfg = serde_json::json!({
        "activation_function": "gelu_pytorch_tanh", "architectures": ["GPTBigCodeForCausalLM"],
        "attention_softmax_in_fp32": true, "bos_token_id": 0, "eos_token_id": 0,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt_bigcode", "multi_query": true,
        "n_embd": 2048, "n_head": 16, "n_inner": 8192, "n_layer": 24, "n_positions": 8192,
        "scale_attention_softmax_in_fp32": true, "scale_attn_weights": true,
        "vocab_size": 49152,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Starcoder);
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (16, 1, 128));
    assert_eq!(
        (c.intermediate_size, c.max_position_embeddings),
        (8192, 8192)
    );
    assert!(c.attention_bias && c.fused_qkv && c.tie_word_embeddings);
    cfg["multi_query"] = serde_json::json!(false);
    assert_eq!(parse(&cfg).unwrap().num_kv_heads, 16);
}

/// BLOOM's config.json (`bigscience/bloom-560m`): its own names of the sizes (`n_head`,
/// `n_layer`; `n_embed` in older configs), no MLP width (four times the hidden size), GELU
/// with the tanh approximation, ALiBi (bias maximum 8) and no rotary embedding, biases on
/// every product, tied embeddings, q/k/v fused; the residual taken after the LayerNorm is
/// refused by name.
#[test]
fn bloom_config() {
    let cfg = serde_json::json!({
        "apply_residual_connection_post_layernorm": false, "architectures": ["BloomForCausalLM"],
        "attention_dropout": 0.0, "attention_softmax_in_fp32": true, "bias_dropout_fusion": true,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0, "hidden_size": 1024,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": true,
        "model_type": "bloom", "n_head": 16, "n_inner": null, "n_layer": 24, "offset_alibi": 100,
        "pad_token_id": 3, "pretraining_tp": 1, "skip_bias_add": true, "skip_bias_add_qkv": false,
        "slow_but_exact": false, "unk_token_id": 0, "use_cache": true, "vocab_size": 250880,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Bloom);
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    assert_eq!((c.hidden_size, c.intermediate_size), (1024, 4096));
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (16, 16, 64));
    assert_eq!(
        (c.num_layers, c.alibi, c.rms_norm_eps),
        (24, Some(8.0), 1e-5)
    );
    assert!(c.attention_bias && c.fused_qkv && c.tie_word_embeddings && !c.parallel_residual);
    assert!(c.layer_rope(0).inv_freq.is_empty());
    // Older configs name the hidden size `n_embed`.
    let mut old = cfg.clone();
    let o = old.as_object_mut().unwrap();
    o.remove("hidden_size");
    o.insert("n_embed".into(), serde_json::json!(2048));
    assert_eq!(parse(&old).unwrap().head_dim, 128);
    let mut bad = cfg.clone();
    bad["apply_residual_connection_post_layernorm"] = serde_json::json!(true);
    let e = parse(&bad).unwrap_err().to_string();
    assert!(
        e.contains("BLOOM") && e.contains("after the LayerNorm"),
        "{e}"
    );
}

/// MPT's config.json (`mosaicml/mpt-7b`): its own names of the sizes (`d_model`, `n_heads`,
/// `n_layers`, `max_seq_len`, `expansion_ratio`), no biases (`no_bias`), the exact GELU, ALiBi
/// at `attn_config.alibi_bias_max`, tied embeddings, q/k/v fused. What else `attn_config`
/// may ask, and biases, are refused by name.
#[test]
fn mpt_config() {
    let cfg = serde_json::json!({
        "architectures": ["MPTForCausalLM"], "attn_config": {
            "alibi": true, "alibi_bias_max": 8, "attn_impl": "torch", "attn_pdrop": 0,
            "attn_type": "multihead_attention", "attn_uses_sequence_id": false,
            "clip_qkv": null, "prefix_lm": false, "qk_ln": false, "softmax_scale": null,
        },
        "d_model": 4096, "emb_pdrop": 0, "embedding_fraction": 1.0, "expansion_ratio": 4,
        "init_device": "cpu", "learned_pos_emb": true, "logit_scale": null, "max_seq_len": 2048,
        "model_type": "mpt", "n_heads": 32, "n_layers": 32, "no_bias": true,
        "norm_type": "low_precision_layernorm", "resid_pdrop": 0,
        "tokenizer_name": "EleutherAI/gpt-neox-20b", "torch_dtype": "bfloat16",
        "use_cache": false, "verbose": 0, "vocab_size": 50432,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Mpt);
    assert_eq!(c.activation, kiln_model::Activation::Gelu);
    assert_eq!((c.hidden_size, c.intermediate_size), (4096, 16384));
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (32, 32, 128));
    assert_eq!((c.num_layers, c.max_position_embeddings), (32, 2048));
    assert_eq!((c.alibi, c.rms_norm_eps), (Some(8.0), 1e-5));
    assert!(!c.attention_bias && c.fused_qkv && c.tie_word_embeddings && !c.parallel_residual);
    let mut other = cfg.clone();
    other["attn_config"]["alibi_bias_max"] = serde_json::json!(16);
    assert_eq!(parse(&other).unwrap().alibi, Some(16.0));
    for (key, value, named) in [
        ("alibi", serde_json::json!(false), "learned positions"),
        ("clip_qkv", serde_json::json!(6.0), "clip_qkv"),
        ("qk_ln", serde_json::json!(true), "qk_ln"),
        ("softmax_scale", serde_json::json!(0.1), "softmax_scale"),
        ("prefix_lm", serde_json::json!(true), "prefix_lm"),
        (
            "attn_type",
            serde_json::json!("multiquery_attention"),
            "multiquery_attention",
        ),
    ] {
        let mut bad = cfg.clone();
        bad["attn_config"][key] = value;
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("MPT") && e.contains(named), "{key}: {e}");
    }
    let mut bad = cfg.clone();
    bad["no_bias"] = serde_json::json!(false);
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.contains("MPT with biases"), "{e}");
}

/// Phi-2's config.json: `gelu_new` (GELU's tanh approximation), 40% of each head turning
/// (32 of 80 dimensions; Phi-1.5's half when the factor is left out), biases on every
/// product and an untied LM head with its own; `kiln info` names the side-by-side layer.
/// LayerNorms of q and k (`qk_layernorm`) are refused by name.
#[test]
fn phi2_config() {
    let mut cfg = serde_json::json!({
        "architectures": ["PhiForCausalLM"], "model_type": "phi",
        "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 51200,
        "max_position_embeddings": 2048, "layer_norm_eps": 1e-05, "rope_theta": 10000.0,
        "partial_rotary_factor": 0.4, "qk_layernorm": false, "hidden_act": "gelu_new",
        "tie_word_embeddings": false, "bos_token_id": 50256, "eos_token_id": 50256,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Phi2);
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    assert_eq!((c.head_dim, c.partial_rotary_dim), (80, Some(32)));
    assert!(c.attention_bias && !c.tie_word_embeddings && !c.fused_qkv);
    assert_eq!((c.rms_norm_eps, c.max_position_embeddings), (1e-5, 2048));
    let t = kiln_model::ModelTensors::for_config(&c);
    assert_eq!(t.lm_head_bias.map(|b| b.shape), Some(vec![51200]));
    assert_eq!(
        t.final_norm_bias.unwrap().name,
        "model.final_layernorm.bias"
    );
    assert!(c.features().contains(
        &"one LayerNorm (with biases) before attention and the MLP, which run side by side".into()
    ));
    cfg.as_object_mut().unwrap().remove("partial_rotary_factor");
    assert_eq!(parse(&cfg).unwrap().partial_rotary_dim, Some(40));
    cfg["qk_layernorm"] = serde_json::json!(true);
    let e = parse(&cfg).expect_err("must fail");
    assert!(e.to_string().contains("qk_layernorm"), "{e}");
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
