//! The config.json of the families that name the common keys their own way: GPT-NeoX's
//! (`rotary_pct`, `rotary_emb_base`), Falcon's, GPT-2's and StarCoder's (`n_embd`,
//! `n_positions`, ...), BLOOM's, MPT's (`d_model`, `attn_config`, ...) and GPT-J's
//! (GPT-2's names and `rotary_dim`).

use kiln_model::ModelConfig;

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

/// GPT-J-6B's config.json: GPT-2's names of the sizes, `gelu_new`, 64 of each head's 256
/// dimensions turning (`rotary_dim`, 64 unless given; `null` with several heads, or not a
/// whole number, refused), no biases on q,
/// k or v, an untied LM head, the MLP four times as wide as the hidden size unless `n_inner`
/// says; llama.cpp writes no GPT-J files, and a GGUF file naming `gptj` is refused by name.
#[test]
fn gptj_config() {
    let cfg = serde_json::json!({
        "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"],
        "attn_pdrop": 0.0, "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256,
        "gradient_checkpointing": false, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
        "model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_inner": null, "n_layer": 28,
        "n_positions": 2048, "resid_pdrop": 0.0, "rotary": true, "rotary_dim": 64,
        "scale_attn_weights": true, "tie_word_embeddings": false, "use_cache": true,
        "vocab_size": 50400,
    });
    let parse = |c: &serde_json::Value| ModelConfig::from_hf_json(&c.to_string(), "config.json");
    let c = parse(&cfg).unwrap();
    assert_eq!(c.architecture, kiln_model::Architecture::GptJ);
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    assert_eq!((c.hidden_size, c.intermediate_size), (4096, 16384));
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (16, 16, 256));
    assert_eq!((c.num_layers, c.max_position_embeddings), (28, 2048));
    assert_eq!((c.partial_rotary_dim, c.rope_theta), (Some(64), 10000.0));
    assert_eq!((c.rms_norm_eps, c.vocab_size), (1e-5, 50400));
    assert!(!c.attention_bias && !c.fused_qkv && !c.tie_word_embeddings && !c.parallel_residual);
    let with = |key: &str, value: serde_json::Value| {
        let mut other = cfg.clone();
        other[key] = value;
        parse(&other).unwrap()
    };
    assert_eq!(
        with("rotary_dim", serde_json::json!(32)).partial_rotary_dim,
        Some(32)
    );
    for bad in [
        serde_json::Value::Null,
        serde_json::json!(64.5),
        serde_json::json!("64"),
    ] {
        let mut other = cfg.clone();
        other["rotary_dim"] = bad.clone();
        let e = parse(&other).unwrap_err().to_string();
        assert!(e.contains("rotary_dim"), "{bad}: {e}");
    }
    assert_eq!(
        with("n_inner", serde_json::json!(8192)).intermediate_size,
        8192
    );
    let mut absent = cfg.clone();
    absent.as_object_mut().unwrap().remove("rotary_dim");
    assert_eq!(parse(&absent).unwrap().partial_rotary_dim, Some(64));
    let mut bad = cfg.clone();
    bad["activation_function"] = serde_json::json!("relu");
    assert!(parse(&bad).is_err());
}
