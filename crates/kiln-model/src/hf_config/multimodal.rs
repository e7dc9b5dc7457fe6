//! The language model of a multimodal folder, run on text alone: Gemma 3's (4B, 12B, 27B:
//! `model_type` `gemma3`, `Gemma3ForConditionalGeneration`), Mistral 3's (Mistral Small 3.1
//! and 3.2, Magistral Small: `mistral3`), Qwen2-VL's and Qwen2.5-VL's (Qwen2's layer) and
//! Qwen3-VL's (Qwen3's). Their config.json holds the language model's config under
//! `text_config`, often only what differs from its configuration class's defaults, which are
//! filled in here as transformers fills them (Qwen2-VL's older configs keep it at the top
//! level, beside `vision_config`); the tokens' ids (`eos_token_id`, ...) the wrapper gives
//! stand where the text config has none. A text config of another kind than the wrapper's
//! own (Ministral 3's `ministral3` inside `mistral3`) is refused by name. Qwen's multimodal
//! RoPE (`mrope_section`) turns a text token's pairs by its one position in every section,
//! which is Qwen2's and Qwen3's RoPE: it is read as that. The loader renames their tensors
//! (`language_model.model.*` or `model.language_model.*`) and leaves out the vision tower and
//! its projector, which kiln does not run ([`VISION`]).

use serde_json::{Map, Value, json};

use crate::ModelError;

/// A wrapper whose language model kiln runs: the `model_type` of the text config it holds
/// (`None`: none given), the kiln family that reads it, and the defaults of its configuration
/// class (transformers 5's).
struct Wrapped {
    text_type: &'static str,
    family: &'static str,
    defaults: Value,
}

/// The wrappers kiln runs the language model of, by their `model_type`.
fn wrapped(model_type: &str) -> Option<Wrapped> {
    let qwen2 = || {
        json!({
            "vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
            "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
            "rope_theta": 1_000_000.0, "use_sliding_window": false, "sliding_window": 4096,
            "max_window_layers": 80, "tie_word_embeddings": false, "bos_token_id": 151643,
            "eos_token_id": 151645,
        })
    };
    Some(match model_type {
        "gemma3" => Wrapped {
            text_type: "gemma3_text",
            family: "gemma3_text",
            defaults: json!({
                "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
                "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
                "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0,
                "query_pre_attn_scalar": 256, "sliding_window": 4096, "sliding_window_pattern": 6,
                "attention_bias": false, "tie_word_embeddings": true, "bos_token_id": 2,
                "eos_token_id": 1,
            }),
        },
        "mistral3" => Wrapped {
            text_type: "mistral",
            family: "mistral",
            defaults: json!({
                "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "hidden_act": "silu", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
                "bos_token_id": 1, "eos_token_id": 2,
            }),
        },
        "qwen2_vl" => Wrapped {
            text_type: "qwen2_vl_text",
            family: "qwen2",
            defaults: qwen2(),
        },
        "qwen2_5_vl" => Wrapped {
            text_type: "qwen2_5_vl_text",
            family: "qwen2",
            defaults: qwen2(),
        },
        "qwen3_vl" => Wrapped {
            text_type: "qwen3_vl_text",
            family: "qwen3",
            defaults: json!({
                "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 128000,
                "rms_norm_eps": 1e-6, "rope_theta": 500_000.0, "attention_bias": false,
                "tie_word_embeddings": false,
            }),
        },
        _ => return None,
    })
}

/// Whether `model_type` is a multimodal wrapper whose language model kiln runs.
pub(super) fn is_wrapper(model_type: &str) -> bool {
    wrapped(model_type).is_some()
}

/// The prefixes of a multimodal folder's tensors that kiln leaves out: the vision tower and
/// its projector, as the released checkpoints and transformers 5 name them.
pub(crate) const VISION: [&str; 6] = [
    "vision_tower.",
    "multi_modal_projector.",
    "visual.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
    "model.visual.",
];

/// The keys of the wrapper that stand for the language model's where its `text_config` has
/// none.
const SHARED: [&str; 4] = [
    "eos_token_id",
    "bos_token_id",
    "pad_token_id",
    "tie_word_embeddings",
];

/// The config of `v`'s language model where `v` is a multimodal wrapper kiln runs the text
/// model of (`file` names it in errors), else `v` itself.
pub(super) fn language_model(v: Value, file: &str) -> Result<Value, ModelError> {
    let wrapper = v.get("model_type").and_then(Value::as_str).unwrap_or("");
    let Some(Wrapped {
        text_type,
        family,
        defaults: Value::Object(defaults),
    }) = wrapped(wrapper)
    else {
        return Ok(v);
    };
    let refuse = |what: String| {
        Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("a {wrapper} folder whose language model is {what}"),
        })
    };
    // (Qwen2-VL's older configs: the language model's keys at the top level.)
    let mut text: Map<String, Value> = match v.get("text_config") {
        Some(Value::Object(t)) => t.clone(),
        _ if wrapper.starts_with("qwen") => (v.as_object().cloned().unwrap_or_default())
            .into_iter()
            .filter(|(k, _)| k != "vision_config" && k != "model_type")
            .collect(),
        _ => return refuse("not given (no text_config)".into()),
    };
    match text.get("model_type").and_then(Value::as_str) {
        Some(t) if t != text_type => return refuse(format!("of type {t} (text_config)")),
        _ => {}
    }
    for key in SHARED {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            text.entry(key).or_insert(x.clone());
        }
    }
    for key in ["rope_scaling", "rope_parameters"] {
        if let Some(Value::Object(rope)) = text.get_mut(key) {
            plain_rope(rope);
        }
    }
    // A text config whose `rope_parameters` say the base leaves `rope_theta` to them.
    let has_parameters = text.contains_key("rope_parameters");
    for (key, value) in defaults {
        if !(has_parameters && (key == "rope_theta" || key == "rope_local_base_freq")) {
            text.entry(key).or_insert(value);
        }
    }
    text.insert("model_type".into(), family.into());
    Ok(Value::Object(text))
}

/// Qwen's multimodal RoPE entries read as the RoPE they are on text: its sections and their
/// order left out, its kind ("mrope" in Qwen2-VL's configs) the default one.
fn plain_rope(rope: &mut Map<String, Value>) {
    rope.remove("mrope_section");
    rope.remove("mrope_interleaved");
    for key in ["type", "rope_type"] {
        if rope.get(key).and_then(Value::as_str) == Some("mrope") {
            rope.insert(key.into(), "default".into());
        }
    }
}
