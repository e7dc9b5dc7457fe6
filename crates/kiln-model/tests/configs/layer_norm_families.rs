//! The config.json of the families whose norms are LayerNorms under the common keys:
//! Cohere's, StableLM's, Nemotron's, StarCoder2's, Phi-2's and OLMo's.

use kiln_model::ModelConfig;

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

/// OLMo 7B's config.json (as transformers writes it): LayerNorms without gain (epsilon 1e-5,
/// its code's), no `clip_qkv`; OLMo 1.7's `clip_qkv` is refused by name.
#[test]
fn olmo_config() {
    let cfg = serde_json::json!({
        "architectures": ["OlmoForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
        "clip_qkv": null, "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 2048,
        "model_type": "olmo", "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "pad_token_id": 1, "rope_scaling": null, "rope_theta": 10000.0,
        "tie_word_embeddings": false, "torch_dtype": "float32", "use_cache": true,
        "vocab_size": 50304,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::Olmo);
    assert_eq!((c.num_layers, c.num_heads, c.head_dim), (32, 32, 128));
    assert_eq!(
        (c.rms_norm_eps, c.activation),
        (1e-5, kiln_model::Activation::Silu)
    );
    assert!(c.architecture.layer_norm() && !c.architecture.norm_bias());
    assert!(!c.attention_bias && !c.tie_word_embeddings);
    let mut clipped = cfg.clone();
    clipped["clip_qkv"] = serde_json::json!(8.0);
    let e = parse(&clipped).unwrap_err().to_string();
    assert!(e.contains("clip_qkv"), "{e}");
}
