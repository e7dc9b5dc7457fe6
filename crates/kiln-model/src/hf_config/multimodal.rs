//! The language model of a multimodal folder, run on text alone: Gemma 3's (4B, 12B, 27B:
//! `model_type` `gemma3`, `Gemma3ForConditionalGeneration`) and Mistral 3's (Mistral Small
//! 3.1 and 3.2, Magistral Small: `mistral3`). Their config.json holds the language model's
//! config under `text_config`, often only what differs from its configuration class's
//! defaults, which are filled in here as transformers fills them; the tokens' ids (`eos_token_id`,
//! ...) the wrapper gives stand where the text config has none. The loader renames their
//! tensors (`language_model.model.*` or `model.language_model.*`) and leaves out the vision
//! tower and its projector, which kiln does not run.

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
        _ => return None,
    })
}

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
    let mut text: Map<String, Value> = match v.get("text_config") {
        Some(Value::Object(t)) => t.clone(),
        _ => Map::new(),
    };
    for key in SHARED {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            text.entry(key).or_insert(x.clone());
        }
    }
    // A text config whose `rope_parameters` say the base leaves `rope_theta` to them.
    let has_parameters = text.contains_key("rope_parameters");
    for (key, value) in defaults {
        if has_parameters && (key == "rope_theta" || key == "rope_local_base_freq") {
            continue;
        }
        text.entry(key).or_insert(value);
    }
    Value::Object(text)
}
