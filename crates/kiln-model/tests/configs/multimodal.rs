//! The language model of a multimodal folder's config.json: Gemma 3 4B's and 27B's
//! (`gemma3`, a sparse `text_config` over `Gemma3TextConfig`'s defaults), Mistral Small
//! 3.1's (`mistral3`), Qwen2.5-VL's and Qwen3-VL's, as their released folders have them.

use kiln_model::{ModelConfig, RopeScaling};

fn parse(v: &serde_json::Value) -> ModelConfig {
    ModelConfig::from_hf_json(&v.to_string(), "config.json").unwrap()
}

/// Gemma 3 4B: its text config gives only its sizes, window and RoPE scaling; heads, head
/// size, the query scale, RoPE bases, the window pattern and tied embeddings are its class's
/// defaults, the end-of-turn id the wrapper's.
#[test]
fn gemma3_4b_text_model() {
    let cfg = serde_json::json!({
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
        "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
        "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
            "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "torch_dtype": "bfloat16",
        "vision_config": {
            "hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
            "model_type": "siglip_vision_model", "num_attention_heads": 16,
            "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false,
        },
    });
    let c = parse(&cfg);
    assert_eq!(c.architecture, kiln_model::Architecture::Gemma3);
    assert_eq!(
        (c.hidden_size, c.intermediate_size, c.num_layers),
        (2560, 10240, 34)
    );
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (8, 4, 256));
    assert_eq!((c.vocab_size, c.max_position_embeddings), (262208, 131072));
    assert_eq!(
        (c.sliding_window, c.sliding_window_pattern),
        (Some(1024), Some(6))
    );
    assert_eq!((c.rope_theta, c.rope_local_theta), (1e6, Some(1e4)));
    assert_eq!(c.rope_scaling, Some(RopeScaling::Linear(8.0)));
    assert_eq!(c.query_pre_attn_scalar, Some(256.0));
    assert_eq!(c.eos_token_ids, [1, 106]);
    assert!(c.tie_word_embeddings && !c.attention_bias);
    assert_eq!(c.text_model_of.as_deref(), Some("gemma3"));
}

/// Gemma 3 27B: a head size and query scale of its own (128, 168).
#[test]
fn gemma3_27b_text_model() {
    let cfg = serde_json::json!({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "eos_token_id": [1, 106],
        "text_config": {
            "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
            "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
            "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024,
        },
        "vision_config": {"model_type": "siglip_vision_model"},
    });
    let c = parse(&cfg);
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (32, 16, 128));
    assert_eq!((c.num_layers, c.query_pre_attn_scalar), (62, Some(168.0)));
}

/// Mistral Small 3.1: Mistral's layer, no window (`sliding_window` null in its text config
/// stands over the class's 4096), RoPE base 1e9, an untied head.
#[test]
fn mistral_small_3_1_text_model() {
    let cfg = serde_json::json!({
        "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10,
        "model_type": "mistral3", "multimodal_projector_bias": false,
        "projector_hidden_act": "gelu", "spatial_merge_size": 2,
        "text_config": {
            "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
            "initializer_range": 0.02, "intermediate_size": 32768,
            "max_position_embeddings": 131072, "model_type": "mistral",
            "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0, "sliding_window": null,
            "use_cache": true, "vocab_size": 131072,
        },
        "torch_dtype": "bfloat16",
        "vision_config": {"model_type": "pixtral", "hidden_size": 1024},
        "vision_feature_layer": -1,
    });
    let c = parse(&cfg);
    assert_eq!(c.architecture, kiln_model::Architecture::Llama);
    assert_eq!(
        (c.hidden_size, c.num_layers, c.vocab_size),
        (5120, 40, 131072)
    );
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (32, 8, 128));
    assert_eq!((c.rope_theta, c.sliding_window), (1e9, None));
    assert!(!c.tie_word_embeddings);
    assert_eq!(
        (c.bos_token_id, c.eos_token_ids.as_slice()),
        (Some(1), &[2][..])
    );
}

/// Qwen2.5-VL 7B's config.json (transformers 4's, the language model's keys at the top level
/// beside `vision_config`): Qwen2's layer, its multimodal RoPE (`mrope`) read as the RoPE it
/// is on text.
#[test]
fn qwen2_5_vl_text_model() {
    let cfg = serde_json::json!({
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "vision_start_token_id": 151652,
        "vision_end_token_id": 151653, "vision_token_id": 151654, "image_token_id": 151655,
        "video_token_id": 151656, "hidden_act": "silu", "hidden_size": 3584,
        "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 128000,
        "max_window_layers": 28, "model_type": "qwen2_5_vl", "num_attention_heads": 28,
        "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": false,
        "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
        "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280,
            "out_hidden_size": 3584, "model_type": "qwen2_5_vl"},
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vocab_size": 152064,
    });
    let c = parse(&cfg);
    assert_eq!(c.architecture, kiln_model::Architecture::Qwen2);
    assert_eq!(
        (c.hidden_size, c.num_layers, c.vocab_size),
        (3584, 28, 152064)
    );
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (28, 4, 128));
    assert_eq!((c.rope_theta, c.rope_scaling.as_ref()), (1e6, None));
    assert!(c.attention_bias && c.sliding_window.is_none());
}

/// Qwen3-VL 8B's: Qwen3's layer under `text_config`, its interleaved multimodal RoPE read as
/// the RoPE it is on text.
#[test]
fn qwen3_vl_text_model() {
    let cfg = serde_json::json!({
        "architectures": ["Qwen3VLForConditionalGeneration"], "image_token_id": 151655,
        "model_type": "qwen3_vl",
        "text_config": {
            "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
            "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
            "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
            "max_position_embeddings": 262144, "model_type": "qwen3_vl_text",
            "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06,
            "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20],
                "rope_type": "default"},
            "rope_theta": 5000000, "tie_word_embeddings": false, "use_cache": true,
            "vocab_size": 151936,
        },
        "tie_word_embeddings": false, "video_token_id": 151656,
        "vision_config": {"depth": 27, "hidden_size": 1152, "model_type": "qwen3_vl"},
    });
    let c = parse(&cfg);
    assert_eq!(c.architecture, kiln_model::Architecture::Qwen3);
    assert_eq!(
        (c.hidden_size, c.num_layers, c.max_position_embeddings),
        (4096, 36, 262144)
    );
    assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (32, 8, 128));
    assert_eq!((c.rope_theta, c.rope_scaling.as_ref()), (5e6, None));
    assert_eq!(c.eos_token_ids, [151645]);
}
