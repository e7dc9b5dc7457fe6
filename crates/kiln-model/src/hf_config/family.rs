//! What a config.json's `model_type` and its family's flags say: the architecture, whether
//! q, k and v carry biases, the family's own names of the common keys, and MPT's attention
//! options.

use serde_json::Value;

use crate::ModelError;
use crate::config::Architecture;

/// The architecture a config's `model_type` names (a multimodal wrapper's, its language
/// model's: [`super::multimodal`]); gpt-oss (whose folders kiln does not read) is refused by
/// name.
pub(super) fn architecture(model_type: &str, file: &str) -> Result<Architecture, ModelError> {
    Ok(match model_type {
        "llama" | "mistral" => Architecture::Llama,
        "qwen2" => Architecture::Qwen2,
        "qwen3" => Architecture::Qwen3,
        "gemma2" => Architecture::Gemma2,
        "gemma3_text" => Architecture::Gemma3,
        "phi3" => Architecture::Phi3,
        "smollm3" => Architecture::SmolLM3,
        "granite" => Architecture::Granite,
        "granitemoe" | "granitemoeshared" => Architecture::GraniteMoe,
        "minicpm" => Architecture::MiniCpm,
        "cohere" => Architecture::Cohere,
        "cohere2" => Architecture::Cohere2,
        "stablelm" => Architecture::StableLm,
        "nemotron" => Architecture::Nemotron,
        "starcoder2" => Architecture::Starcoder2,
        "phi" => Architecture::Phi2,
        "gpt_neox" => Architecture::GptNeox,
        "falcon" => Architecture::Falcon,
        "gpt2" => Architecture::Gpt2,
        "gpt_bigcode" => Architecture::Starcoder,
        "bloom" => Architecture::Bloom,
        "mpt" => Architecture::Mpt,
        "gptj" => Architecture::GptJ,
        "internlm2" => Architecture::InternLm2,
        "exaone" => Architecture::Exaone,
        "olmo" => Architecture::Olmo,
        // OLMo 3 is OLMo 2 with windows on three layers of four.
        "olmo2" | "olmo3" => Architecture::Olmo2,
        "exaone4" => Architecture::Exaone4,
        "glm4" => Architecture::Glm4,
        "ernie4_5" => Architecture::Ernie45,
        "seed_oss" => Architecture::SeedOss,
        "arcee" => Architecture::Arcee,
        "hunyuan_v1_dense" => Architecture::HunyuanDense,
        "hunyuan_v1_moe" => Architecture::HunyuanMoe,
        "qwen3_moe" => Architecture::Qwen3Moe,
        "mixtral" => Architecture::Mixtral,
        "olmoe" => Architecture::Olmoe,
        "qwen2_moe" => Architecture::Qwen2Moe,
        "glm4_moe" => Architecture::Glm4Moe,
        "ernie4_5_moe" => Architecture::Ernie45Moe,
        "dots1" => Architecture::Dots1,
        "gpt_oss" => {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: "gpt-oss from a Hugging Face folder (its experts stored transposed, \
                         as MXFP4 blocks in the released ones): kiln reads gpt-oss from GGUF \
                         (llama.cpp's `gpt-oss` files)"
                    .into(),
            });
        }
        other => {
            return Err(ModelError::UnsupportedArchitecture {
                file: file.into(),
                architecture: other.into(),
            });
        }
    })
}

/// Whether q, k and v have biases: by each family's flag and default; the flags that would put
/// biases where kiln runs none (on o_proj, on every projection) are refused by name.
pub(super) fn attention_bias(
    v: &Value,
    architecture: Architecture,
    file: &str,
) -> Result<bool, ModelError> {
    // A flag whose value `set` would put biases where kiln runs none (`what`): refused where
    // it has that value; none otherwise.
    let refuse_if = |key: &str, set: bool, what: &str| match v.get(key).and_then(Value::as_bool) {
        Some(x) if x == set => Err(ModelError::Unsupported {
            file: file.into(),
            reason: what.into(),
        }),
        _ => Ok(false),
    };
    Ok(match architecture {
        Architecture::Qwen2 | Architecture::GptOss => true,
        Architecture::Llama
        | Architecture::Mixtral
        | Architecture::Olmoe
        | Architecture::Arcee
        | Architecture::HunyuanDense
        | Architecture::HunyuanMoe
        | Architecture::Qwen3Moe
        | Architecture::Qwen3
        | Architecture::Gemma2
        | Architecture::Gemma3
        | Architecture::Phi3
        | Architecture::SmolLM3
        | Architecture::Granite
        | Architecture::GraniteMoe
        | Architecture::MiniCpm
        | Architecture::Cohere
        | Architecture::Cohere2 => v
            .get("attention_bias")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        // OLMo 2's flag would put a bias on o_proj too, which kiln does not run.
        Architecture::Olmo2 => refuse_if(
            "attention_bias",
            true,
            "OLMo 2 with attention_bias (biases on q, k, v and o)",
        )?,
        // GPT-J's q, k, v and output products never have biases.
        Architecture::Exaone4 | Architecture::Exaone | Architecture::GptJ => false,
        // OLMo's flag puts a bias on o_proj too, which kiln does not run.
        Architecture::Olmo => refuse_if(
            "attention_bias",
            true,
            "OLMo with attention_bias (biases on q, k, v and o)",
        )?,
        // InternLM2's flag puts a bias on `wo` too, which kiln does not run; the released
        // models have none.
        Architecture::InternLm2 => {
            refuse_if("bias", true, "InternLM2 with bias (biases on wqkv and wo)")?
        }
        // MPT's `no_bias` (all the released models') leaves biases off every product and norm;
        // without it they would be on all of them, which kiln does not run.
        Architecture::Mpt => refuse_if("no_bias", false, "MPT with biases (no_bias false)")?,
        // Phi's q, k, v and dense products always have biases, as GPT-2's and StarCoder's
        // every product.
        Architecture::Phi2 | Architecture::Gpt2 | Architecture::Starcoder | Architecture::Bloom => {
            true
        }
        // Falcon's puts them on every product.
        Architecture::Falcon => (v.get("bias").and_then(Value::as_bool)).unwrap_or(false),
        // GPT-NeoX's flag puts biases on q, k, v and the attention's output together.
        Architecture::GptNeox => (v.get("attention_bias").and_then(Value::as_bool)).unwrap_or(true),
        Architecture::StableLm => (v.get("use_qkv_bias").and_then(Value::as_bool)).unwrap_or(false),
        // StarCoder2's flag: biases on q, k, v, o and both MLP products.
        Architecture::Starcoder2 => (v.get("use_bias").and_then(Value::as_bool)).unwrap_or(true),
        // Nemotron's flag puts a bias on o_proj too, which kiln does not run.
        Architecture::Nemotron => refuse_if(
            "attention_bias",
            true,
            "Nemotron with attention_bias (biases on q, k, v and o)",
        )?,
        // Transformers 5 names Qwen2 MoE's flag `qkv_bias`; older configs have none.
        Architecture::Qwen2Moe => v.get("qkv_bias").and_then(Value::as_bool).unwrap_or(true),
        Architecture::Glm4Moe | Architecture::Dots1 => v
            .get("attention_bias")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        Architecture::Glm4 | Architecture::SeedOss => v
            .get("attention_bias")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        // ERNIE 4.5's flag puts biases on o_proj and the MLP too, which kiln does not
        // run; the released models have none.
        Architecture::Ernie45 | Architecture::Ernie45Moe => refuse_if(
            "use_bias",
            true,
            "ERNIE 4.5 with use_bias (biases on every projection)",
        )?,
    })
}

/// `v` with a family's own names for the common keys written under the common names too,
/// where the config has none of the common ones: GPT-NeoX's RoPE base (`rotary_emb_base`) and
/// share of each head that turns (`rotary_pct`); Falcon's older names of its sizes (`n_embed`,
/// `n_head`, `n_layer`), its MLP's width (`ffn_hidden_size`, four times the hidden size unless
/// given), activation (`activation`, exact GELU unless given), LayerNorm epsilon, and its KV
/// heads: `num_kv_heads` on the `new_decoder_architecture` models, one where `multi_query`
/// (its default), as many as the query heads otherwise; GPT-2's and StarCoder's names of the
/// sizes (`n_embd`, `n_head`, `n_layer`, `n_positions`, `n_inner`: four times the hidden size
/// unless given), its activation (`activation_function`: GELU with the tanh approximation
/// unless given) and epsilon, and StarCoder's one KV head where `multi_query` (its default);
/// BLOOM's (`n_embed` in older configs, `n_head`, `n_layer`; its MLP four times as wide as
/// the hidden size, its GELU the tanh one); MPT's (`d_model`, `n_heads`, `n_layers`,
/// `max_seq_len`; its MLP `expansion_ratio` times as wide as the hidden size, 4 unless given,
/// its GELU the exact one); GPT-J's (GPT-2's names, and the dimensions of a head that turn,
/// `rotary_dim`, as a share of the head: `partial_rotary_factor`).
pub(super) fn common_keys(mut v: Value, architecture: Architecture) -> Value {
    let renames: &[(&str, &str)] = match architecture {
        Architecture::GptNeox => &[
            ("rotary_emb_base", "rope_theta"),
            ("rotary_pct", "partial_rotary_factor"),
        ],
        Architecture::Falcon => &[
            ("n_embed", "hidden_size"),
            ("n_head", "num_attention_heads"),
            ("n_layer", "num_hidden_layers"),
            ("ffn_hidden_size", "intermediate_size"),
            ("activation", "hidden_act"),
            ("layer_norm_epsilon", "layer_norm_eps"),
        ],
        // (GPT-J names them as GPT-2 does.)
        Architecture::Gpt2 | Architecture::Starcoder | Architecture::GptJ => &[
            ("n_embd", "hidden_size"),
            ("n_head", "num_attention_heads"),
            ("n_layer", "num_hidden_layers"),
            ("n_positions", "max_position_embeddings"),
            ("n_inner", "intermediate_size"),
            ("activation_function", "hidden_act"),
            ("layer_norm_epsilon", "layer_norm_eps"),
        ],
        Architecture::Mpt => &[
            ("d_model", "hidden_size"),
            ("n_heads", "num_attention_heads"),
            ("n_layers", "num_hidden_layers"),
            ("max_seq_len", "max_position_embeddings"),
            ("layer_norm_epsilon", "layer_norm_eps"),
        ],
        Architecture::Exaone => &[
            ("num_layers", "num_hidden_layers"),
            ("layer_norm_epsilon", "rms_norm_eps"),
            ("activation_function", "hidden_act"),
        ],
        Architecture::Bloom => &[
            ("n_embed", "hidden_size"),
            ("n_head", "num_attention_heads"),
            ("n_layer", "num_hidden_layers"),
            ("layer_norm_epsilon", "layer_norm_eps"),
        ],
        _ => &[],
    };
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    for (own, common) in renames {
        if let Some(x) = o.get(*own).filter(|x| !x.is_null()).cloned() {
            o.entry(*common).or_insert(x);
        }
    }
    let int = |o: &serde_json::Map<String, Value>, k: &str| o.get(k).and_then(Value::as_u64);
    let flag = |o: &serde_json::Map<String, Value>, k: &str| o.get(k).and_then(Value::as_bool);
    if matches!(
        architecture,
        Architecture::Falcon
            | Architecture::Gpt2
            | Architecture::Starcoder
            | Architecture::Bloom
            | Architecture::GptJ
    ) && let Some(h) = int(o, "hidden_size")
    {
        o.entry("intermediate_size").or_insert(Value::from(4 * h));
    }
    if architecture == Architecture::Bloom {
        o.insert("hidden_act".into(), Value::from("gelu_pytorch_tanh"));
    }
    if architecture == Architecture::Mpt {
        let ratio = int(o, "expansion_ratio").unwrap_or(4);
        if let Some(h) = int(o, "hidden_size") {
            o.insert("intermediate_size".into(), Value::from(ratio * h));
        }
        o.insert("hidden_act".into(), Value::from("gelu"));
    }
    if architecture.learned_positions() {
        o.entry("hidden_act").or_insert(Value::from("gelu_new"));
        if architecture == Architecture::Starcoder && flag(o, "multi_query") != Some(false) {
            o.insert("num_key_value_heads".into(), Value::from(1));
        }
    }
    // InternLM2's "dynamic" NTK scaling (InternLM2.5's configs) changes the frequencies only
    // past `max_position_embeddings`, which bounds kiln's context: within it, none.
    if architecture == Architecture::InternLm2
        && o.get("rope_scaling")
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            == Some("dynamic")
    {
        o.remove("rope_scaling");
    }
    // EXAONE 3's class's defaults where its config leaves them out (its RoPE base's too,
    // unless `rope_parameters` give one).
    if architecture == Architecture::Exaone {
        o.entry("num_key_value_heads").or_insert(Value::from(8));
        o.entry("max_position_embeddings")
            .or_insert(Value::from(4096));
        if !o.contains_key("rope_parameters") {
            o.entry("rope_theta").or_insert(Value::from(500_000.0));
        }
    }
    if architecture == Architecture::GptJ {
        o.entry("hidden_act").or_insert(Value::from("gelu_new"));
        // The dimensions of each head that turn: 64 unless given (its configuration class's);
        // `null` (with one head: refused with more) turns all of them.
        let rotary = match o.get("rotary_dim") {
            None => Some(64),
            Some(r) => r.as_u64(),
        };
        if let (Some(r), Some(h), Some(heads)) = (
            rotary,
            int(o, "hidden_size"),
            int(o, "num_attention_heads").filter(|&n| n > 0),
        ) {
            let factor = r as f64 / (h / heads) as f64;
            o.insert("partial_rotary_factor".into(), Value::from(factor));
        }
    }
    if architecture == Architecture::Falcon {
        o.entry("hidden_act").or_insert(Value::from("gelu"));
        let heads = int(o, "num_attention_heads");
        let kv = match (flag(o, "new_decoder_architecture"), flag(o, "multi_query")) {
            (Some(true), _) => int(o, "num_kv_heads").or(heads),
            (_, Some(false)) => heads,
            _ => Some(1),
        };
        if let Some(kv) = kv {
            o.insert("num_key_value_heads".into(), Value::from(kv));
        }
    }
    v
}

/// MPT's attention (`attn_config`): what its config may ask of its attention besides ALiBi,
/// which kiln does not run, is refused by name: positions learned instead of ALiBi, q, k and v
/// clipped or LayerNorm'd, a scale of its own, attention other than multi-head, a prefix
/// attended both ways, and logits scaled.
pub(super) fn mpt_attention(v: &Value, file: &str) -> Result<(), ModelError> {
    let a = v.get("attn_config").cloned().unwrap_or(Value::Null);
    let set = |k: &str| {
        a.get(k)
            .filter(|x| !x.is_null() && **x != Value::Bool(false))
    };
    let refuse = |what: &str| {
        Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("MPT with {what}"),
        })
    };
    if a.get("alibi").and_then(Value::as_bool) == Some(false) {
        return refuse("learned positions instead of ALiBi (attn_config.alibi false)");
    }
    for (key, what) in [
        ("clip_qkv", "q, k and v clipped (attn_config.clip_qkv)"),
        ("qk_ln", "LayerNorms of q and k (attn_config.qk_ln)"),
        (
            "softmax_scale",
            "an attention scale of its own (attn_config.softmax_scale)",
        ),
        (
            "prefix_lm",
            "a prefix attended both ways (attn_config.prefix_lm)",
        ),
    ] {
        if set(key).is_some() {
            return refuse(what);
        }
    }
    if let Some(t) = a.get("attn_type").and_then(Value::as_str)
        && t != "multihead_attention"
    {
        return refuse(&format!("attention of type {t} (attn_config.attn_type)"));
    }
    if v.get("logit_scale").is_some_and(|s| !s.is_null()) {
        return refuse("its logits scaled (logit_scale)");
    }
    Ok(())
}

/// MPT's ALiBi bias maximum (`attn_config.alibi_bias_max`, 8 unless given).
pub(super) fn mpt_alibi_bias_max(v: &Value) -> f32 {
    v.pointer("/attn_config/alibi_bias_max")
        .and_then(Value::as_f64)
        .unwrap_or(8.0) as f32
}
