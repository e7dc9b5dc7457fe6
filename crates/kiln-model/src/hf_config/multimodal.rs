//! The language model of a multimodal folder, run on text alone: Gemma 3's (4B, 12B, 27B:
//! `model_type` `gemma3`, `Gemma3ForConditionalGeneration`), Mistral 3's (Mistral Small 3.1
//! and 3.2, Magistral Small: `mistral3`), Qwen2-VL's and Qwen2.5-VL's (Qwen2's layer) and
//! Qwen3-VL's (Qwen3's). Their config.json holds the language model's config under
//! `text_config`, often only what differs from its configuration class's defaults, which are
//! filled in here as transformers fills them (Qwen2-VL's older configs keep it at the top
//! level, beside `vision_config`); the tokens' ids (`eos_token_id`, ...) the wrapper gives
//! stand where the text config has none. Qwen's multimodal RoPE (`mrope_section`) turns a
//! text token's pairs by its one position in every section, which is Qwen2's and Qwen3's
//! RoPE: it is read as that. The loader renames their tensors (`language_model.model.*` or
//! `model.language_model.*`) and leaves out the vision tower and its projector, which kiln
//! does not run ([`VISION`]).

use serde_json::{Map, Value, json};

/// The wrappers whose `text_config` kiln runs: their `model_type`, and the defaults of their
/// language model's configuration class (transformers 5's `Gemma3TextConfig` and
/// `MistralConfig`).
fn text_defaults(model_type: &str) -> Option<Value> {
    Some(match model_type {
        "gemma3" => json!({
            "model_type": "gemma3_text", "vocab_size": 262208, "hidden_size": 2304,
            "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
            "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
            "rope_local_base_freq": 10_000.0, "query_pre_attn_scalar": 256,
            "sliding_window": 4096, "sliding_window_pattern": 6, "attention_bias": false,
            "tie_word_embeddings": true, "bos_token_id": 2, "eos_token_id": 1,
        }),
        "mistral3" => json!({
            "model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "sliding_window": 4096,
            "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
        }),
        "qwen2_vl" | "qwen2_5_vl" => json!({"model_type": "qwen2"}),
        "qwen3_vl" => json!({"model_type": "qwen3"}),
        _ => return None,
    })
}

/// Whether `model_type` is a multimodal wrapper whose language model kiln runs.
pub(crate) fn is_wrapper(model_type: &str) -> bool {
    text_defaults(model_type).is_some()
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
/// model of, else `v` itself.
pub(super) fn language_model(v: Value) -> Value {
    let wrapper = v.get("model_type").and_then(Value::as_str).unwrap_or("");
    let Some(Value::Object(defaults)) = text_defaults(wrapper) else {
        return v;
    };
    // (Qwen2-VL's older configs: the language model's keys at the top level.)
    let mut text: Map<String, Value> = match v.get("text_config") {
        Some(Value::Object(t)) => t.clone(),
        _ if wrapper.starts_with("qwen") => (v.as_object().cloned().unwrap_or_default())
            .into_iter()
            .filter(|(k, _)| k != "vision_config" && k != "model_type")
            .collect(),
        _ => Map::new(),
    };
    for key in ["rope_scaling", "rope_parameters"] {
        if let Some(Value::Object(rope)) = text.get_mut(key) {
            plain_rope(rope);
        }
    }
    for key in SHARED {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            text.entry(key).or_insert(x.clone());
        }
    }
    // A text config whose `rope_parameters` say the base leaves `rope_theta` to them.
    let has_parameters = text.contains_key("rope_parameters");
    // (The text config's own `model_type` names its class, `qwen3_vl_text`; kiln runs the
    // text family it is.)
    for (key, value) in defaults {
        match key.as_str() {
            "model_type" => _ = text.insert(key, value),
            "rope_theta" | "rope_local_base_freq" if has_parameters => {}
            _ => _ = text.entry(key).or_insert(value),
        }
    }
    Value::Object(text)
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
