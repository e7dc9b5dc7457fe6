//! config.json of a tiny model's Hugging Face folder as its architecture's folders spell it:
//! the class and `model_type`, the common keys, `rope_scaling`, and each family's own (Gemma's
//! soft caps and layer kinds, the sliding windows' keys, SmolLM3's layers without RoPE,
//! Hunyuan's NTK alpha, the LayerNorm families' epsilons, Granite's and MiniCPM's multipliers,
//! Phi-3's original context). The experts' keys are in [`super::moe_config_keys`], those of the
//! families that name their keys their own way in [`super::native_folder`].

use serde_json::json;

use crate::{Activation, Architecture, LongRope, ModelConfig, RopeScaling, Yarn};

/// The NTK alpha of tiny Hunyuan folders.
const HUNYUAN_ALPHA: f64 = 4.0;

/// config.json for the model `mc`.
pub(super) fn config_json(mc: &ModelConfig) -> serde_json::Value {
    // A Llama with a window is written as Mistral, whose folders carry one.
    let mistral = mc.architecture == Architecture::Llama && mc.sliding_window.is_some();
    // A Granite MoE with a shared expert as GraniteMoeShared.
    let shared = mc.moe.is_some_and(|m| m.shared.is_some());
    // And an OLMo 2 with windows as OLMo 3.
    let windowed = mc.sliding_window.is_some();
    let config = json!({
        "architectures": [match mc.architecture {
            Architecture::Llama if mistral => "MistralForCausalLM",
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
            Architecture::Gemma2 => "Gemma2ForCausalLM",
            Architecture::Gemma3 => "Gemma3ForCausalLM",
            Architecture::Phi3 => "Phi3ForCausalLM",
            Architecture::SmolLM3 => "SmolLM3ForCausalLM",
            Architecture::Granite => "GraniteForCausalLM",
            Architecture::MiniCpm => "MiniCPMForCausalLM",
            Architecture::Cohere => "CohereForCausalLM",
            Architecture::Cohere2 => "Cohere2ForCausalLM",
            Architecture::StableLm => "StableLmForCausalLM",
            Architecture::Nemotron => "NemotronForCausalLM",
            Architecture::Starcoder2 => "Starcoder2ForCausalLM",
            Architecture::Phi2 => "PhiForCausalLM",
            Architecture::GptNeox => "GPTNeoXForCausalLM",
            Architecture::Falcon => "FalconForCausalLM",
            Architecture::Gpt2 => "GPT2LMHeadModel",
            Architecture::Starcoder => "GPTBigCodeForCausalLM",
            Architecture::Bloom => "BloomForCausalLM",
            Architecture::Mpt => "MptForCausalLM",
            Architecture::GptJ => "GPTJForCausalLM",
            Architecture::InternLm2 => "InternLM2ForCausalLM",
            Architecture::Exaone => "ExaoneForCausalLM",
            Architecture::Olmo => "OlmoForCausalLM",
            Architecture::Olmo2 if windowed => "Olmo3ForCausalLM",
            Architecture::Olmo2 => "Olmo2ForCausalLM",
            Architecture::Exaone4 => "Exaone4ForCausalLM",
            Architecture::Glm4 => "Glm4ForCausalLM",
            Architecture::Ernie45 => "Ernie4_5ForCausalLM",
            Architecture::SeedOss => "SeedOssForCausalLM",
            Architecture::Arcee => "ArceeForCausalLM",
            Architecture::HunyuanDense => "HunYuanDenseV1ForCausalLM",
            Architecture::Qwen3Moe => "Qwen3MoeForCausalLM",
            Architecture::Mixtral => "MixtralForCausalLM",
            Architecture::Olmoe => "OlmoeForCausalLM",
            Architecture::Qwen2Moe => "Qwen2MoeForCausalLM",
            Architecture::Glm4Moe => "Glm4MoeForCausalLM",
            Architecture::Ernie45Moe => "Ernie4_5_MoeForCausalLM",
            Architecture::GraniteMoe if shared => "GraniteMoeSharedForCausalLM",
            Architecture::GraniteMoe => "GraniteMoeForCausalLM",
            Architecture::Dots1 => "Dots1ForCausalLM",
            Architecture::HunyuanMoe => "HunYuanMoEV1ForCausalLM",
            Architecture::GptOss => "GptOssForCausalLM",
        }],
        "model_type": match mc.architecture {
            Architecture::Llama if mistral => "mistral",
            Architecture::Olmo2 if windowed => "olmo3",
            Architecture::Gemma3 => "gemma3_text",
            Architecture::HunyuanDense => "hunyuan_v1_dense",
            Architecture::HunyuanMoe => "hunyuan_v1_moe",
            Architecture::Qwen3Moe => "qwen3_moe",
            Architecture::Mixtral => "mixtral",
            Architecture::Qwen2Moe => "qwen2_moe",
            Architecture::Glm4Moe => "glm4_moe",
            Architecture::Ernie45Moe => "ernie4_5_moe",
            Architecture::GptOss => "gpt_oss",
            Architecture::Cohere => "cohere",
            Architecture::Phi2 => "phi",
            Architecture::GptNeox => "gpt_neox",
            Architecture::Starcoder => "gpt_bigcode",
            Architecture::GraniteMoe if shared => "granitemoeshared",
            a => a.gguf_name(),
        },
        "hidden_size": mc.hidden_size, "intermediate_size": mc.intermediate_size,
        "num_hidden_layers": mc.num_layers, "num_attention_heads": mc.num_heads,
        "num_key_value_heads": mc.num_kv_heads, "head_dim": mc.head_dim, "vocab_size": mc.vocab_size,
        "max_position_embeddings": mc.max_position_embeddings, "rms_norm_eps": mc.rms_norm_eps,
        "rope_theta": mc.rope_theta, "tie_word_embeddings": mc.tie_word_embeddings,
        "sliding_window": mc.sliding_window,
        "rope_scaling": mc.rope_scaling.as_ref().map(|s| rope_scaling_json(mc, s)),
        "attention_bias": mc.attention_bias,
        "hidden_act": if mc.activation == Activation::Relu2 { "relu2" } else { "silu" }, "eos_token_id": mc.eos_token_ids[0],
        "torch_dtype": "float32",
    });
    let mut config = config;
    if mc.architecture.is_gemma() {
        let mut extra = json!({
            "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 24,
            "sliding_window_pattern": mc.sliding_window_pattern,
            "rope_local_base_freq": mc.rope_local_theta,
            "attn_logit_softcapping": mc.attn_softcap,
            "final_logit_softcapping": mc.final_softcap,
        });
        if mc.architecture == Architecture::Gemma2 {
            // Gemma 2's folders name each layer's kind (newer transformers writes the list;
            // older folders have none and alternate).
            extra["layer_types"] = json!(layer_types(mc));
            extra
                .as_object_mut()
                .unwrap()
                .remove("sliding_window_pattern");
            extra
                .as_object_mut()
                .unwrap()
                .remove("rope_local_base_freq");
        }
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
    }
    if matches!(
        mc.architecture,
        Architecture::Qwen2 | Architecture::Qwen3 | Architecture::SmolLM3
    ) && mc.sliding_window.is_some()
    {
        config["use_sliding_window"] = json!(true);
        config["max_window_layers"] = json!(mc.first_sliding_layer);
    }
    if mc.architecture == Architecture::Olmo2 && windowed {
        config["layer_types"] = json!(layer_types(mc));
    }
    if matches!(
        mc.architecture,
        Architecture::Exaone4 | Architecture::Cohere2
    ) {
        // Both as EXAONE's folders carry them (its config cannot make layer types without a
        // window).
        config["layer_types"] = json!(layer_types(mc));
        config["sliding_window_pattern"] = json!(mc.sliding_window_pattern);
    }
    if mc.architecture == Architecture::SmolLM3 {
        // One flag a layer, 1 where it applies RoPE, as SmolLM3's folders carry it.
        let flags: Vec<u8> = (0..mc.num_layers)
            .map(|i| u8::from(!mc.no_rope_layers.contains(&i)))
            .collect();
        config["no_rope_layers"] = json!(flags);
        config["no_rope_layer_interval"] = json!(4);
    }
    if matches!(
        mc.architecture,
        Architecture::Ernie45 | Architecture::Ernie45Moe
    ) {
        config["use_bias"] = json!(false);
    }
    if matches!(
        mc.architecture,
        Architecture::HunyuanDense | Architecture::HunyuanMoe
    ) {
        // Its fixed NTK alpha, as Hunyuan's folders give it: the stored base stretched by
        // alpha^(d / (d - 2)) is the model's.
        let d = mc.head_dim as f64;
        config["rope_theta"] = json!(mc.rope_theta as f64 / HUNYUAN_ALPHA.powf(d / (d - 2.0)));
        config["rope_scaling"] = json!({"type": "dynamic", "alpha": HUNYUAN_ALPHA, "factor": 1.0});
    }
    super::moe_config_keys::moe_keys(mc, &mut config);
    if mc.architecture == Architecture::SeedOss {
        config["attention_out_bias"] = json!(false);
        config["mlp_bias"] = json!(false);
    }
    if mc.architecture.layer_norm() {
        // The LayerNorms' epsilon by its name, and Cohere's logit scale rather than a divisor.
        let eps = config
            .as_object_mut()
            .and_then(|c| c.remove("rms_norm_eps"));
        let key = match mc.architecture {
            Architecture::Nemotron => "norm_eps",
            Architecture::Starcoder2 => "norm_epsilon",
            _ => "layer_norm_eps",
        };
        config[key] = eps.unwrap_or_default();
        if mc.architecture == Architecture::StableLm {
            config["use_qkv_bias"] = json!(mc.attention_bias);
            config["qk_layernorm"] = json!(mc.qk_layer_norm);
            config["use_parallel_residual"] = json!(mc.parallel_residual);
        } else if mc.architecture == Architecture::Starcoder2 {
            config["use_bias"] = json!(mc.attention_bias);
            config["hidden_act"] = json!("gelu_pytorch_tanh");
        } else if mc.architecture == Architecture::Phi2 {
            config["qk_layernorm"] = json!(false);
            config["hidden_act"] = json!("gelu_new");
        } else if mc.architecture != Architecture::Nemotron {
            config["use_qk_norm"] = json!(mc.qk_layer_norm);
        }
        if let Some(g) = mc.granite {
            config["logit_scale"] = json!(1.0 / f64::from(g.logits));
        }
    } else if let (Architecture::MiniCpm, Some(g)) = (mc.architecture, mc.granite) {
        // MiniCPM's keys, from which kiln works the multipliers out ([`TinyConfig::minicpm`]).
        config["scale_emb"] = json!(g.embedding);
        config["scale_depth"] = json!(f64::from(g.residual) * (mc.num_layers as f64).sqrt());
        config["dim_model_base"] = json!(mc.hidden_size as f64 / f64::from(g.logits));
    } else if let Some(g) = mc.granite {
        config["embedding_multiplier"] = json!(g.embedding);
        config["attention_multiplier"] = json!(g.attention);
        config["residual_multiplier"] = json!(g.residual);
        config["logits_scaling"] = json!(g.logits);
    }
    if let Some(r) = mc.partial_rotary_dim {
        config["partial_rotary_factor"] = json!(r as f64 / mc.head_dim as f64);
    }
    if crate::models::NativeFolder::of(mc).is_some() {
        super::native_folder::config_keys(mc, &mut config);
    }
    if let Some(RopeScaling::LongRope(r)) = &mc.rope_scaling {
        // Phi-3's folders keep the pre-training context outside the scaling object.
        config["original_max_position_embeddings"] = json!(r.original_max_position_embeddings);
    }
    config
}

/// Each layer's kind as config.json's `layer_types` names it.
pub(super) fn layer_types(mc: &ModelConfig) -> Vec<&'static str> {
    (0..mc.num_layers)
        .map(|i| match mc.layer_window(i) {
            Some(_) => "sliding_attention",
            None => "full_attention",
        })
        .collect()
}

/// `rope_scaling` as config.json spells it, the factors on cos and sin left out where they are
/// the defaults transformers computes.
fn rope_scaling_json(mc: &ModelConfig, s: &RopeScaling) -> serde_json::Value {
    match s {
        RopeScaling::Linear(f) => json!({"rope_type": "linear", "factor": f}),
        RopeScaling::Llama3(s) => json!({
            "rope_type": "llama3", "factor": s.factor, "low_freq_factor": s.low_freq_factor,
            "high_freq_factor": s.high_freq_factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
        }),
        RopeScaling::LongRope(r) => {
            let mut scaling = json!({
                "type": "longrope", "short_factor": r.short_factor, "long_factor": r.long_factor,
            });
            let default = LongRope::default_attention_factor(
                mc.max_position_embeddings,
                r.original_max_position_embeddings,
            );
            if r.attention_factor != default {
                scaling["attention_factor"] = json!(r.attention_factor);
            }
            scaling
        }
        RopeScaling::Yarn(y) => {
            let mut scaling = json!({
                "rope_type": "yarn", "factor": y.factor,
                "original_max_position_embeddings": y.original_max_position_embeddings,
                "beta_fast": y.beta_fast, "beta_slow": y.beta_slow,
            });
            if y.attention_factor != Yarn::mscale(y.factor as f64, 1.0) as f32 {
                scaling["attention_factor"] = json!(y.attention_factor);
            }
            if !y.truncate {
                scaling["truncate"] = json!(false);
            }
            scaling
        }
    }
}
