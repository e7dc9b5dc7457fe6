//! Reading JavaScript option objects: numbers, parsed strings, and `start`'s generation
//! parameters (the server's fields, checked by kiln-frontend).

use js_sys::Reflect;
use kiln_frontend::GenerationParams;
use wasm_bindgen::prelude::*;

use crate::err;

pub(crate) fn num(obj: &JsValue, key: &str) -> Result<Option<f64>, JsValue> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(None);
    }
    let v = Reflect::get(obj, &JsValue::from_str(key))?;
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_f64()
        .map(Some)
        .ok_or_else(|| err(format!("{key} must be a number")))
}

/// A whole-number option of at least `min`; `None` when absent. A fraction, a negative
/// number or one below `min` is an error, never rounded or clamped.
pub(crate) fn count(obj: &JsValue, key: &str, min: usize) -> Result<Option<usize>, JsValue> {
    match num(obj, key)? {
        None => Ok(None),
        Some(v) if v.fract() == 0.0 && v >= min as f64 && v <= u32::MAX as f64 => {
            Ok(Some(v as usize))
        }
        Some(v) => Err(err(format!(
            "{key} must be a whole number of at least {min}, not {v}"
        ))),
    }
}

/// A string option parsed with `FromStr`; `None` when absent.
pub(crate) fn parsed<T: std::str::FromStr<Err = String>>(
    obj: &JsValue,
    key: &str,
) -> Result<Option<T>, JsValue> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(None);
    }
    let v = Reflect::get(obj, &JsValue::from_str(key))?;
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    let text = v
        .as_string()
        .ok_or_else(|| err(format!("{key} must be a string")))?;
    text.parse()
        .map(Some)
        .map_err(|e: String| err(format!("{key}: {e}")))
}

/// `loadModel`'s `lora` option: LoRA adapters for `config`'s model, each `{name, gguf}` (a
/// GGUF adapter file's bytes) or `{name, config, safetensors}` (a PEFT folder's
/// `adapter_config.json` text and `adapter_model.safetensors` bytes).
pub(crate) fn lora_adapters(
    options: &JsValue,
    config: &kiln_model::ModelConfig,
) -> Result<Vec<std::sync::Arc<kiln_model::LoraAdapter>>, JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok(Vec::new());
    }
    let list = Reflect::get(options, &JsValue::from_str("lora"))?;
    if list.is_undefined() || list.is_null() {
        return Ok(Vec::new());
    }
    if !js_sys::Array::is_array(&list) {
        return Err(err("lora must be an array of adapters"));
    }
    (js_sys::Array::from(&list).iter().enumerate())
        .map(|(i, a)| lora_adapter(&a, &format!("lora[{i}]"), config).map(std::sync::Arc::new))
        .collect()
}

/// One LoRA adapter for `config`'s model from `{name, gguf}` or `{name, config,
/// safetensors}` (`what`: how errors name it).
pub(crate) fn lora_adapter(
    a: &JsValue,
    what: &str,
    config: &kiln_model::ModelConfig,
) -> Result<kiln_model::LoraAdapter, JsValue> {
    let get = |k: &str| Reflect::get(a, &JsValue::from_str(k));
    let bytes = |v: JsValue, field: &str| {
        v.dyn_into::<js_sys::Uint8Array>()
            .map(|a| a.to_vec())
            .map_err(|_| err(format!("{what}.{field} must be a Uint8Array")))
    };
    let name =
        (get("name")?.as_string()).ok_or_else(|| err(format!("{what}.name must be a string")))?;
    let gguf = get("gguf")?;
    let adapter = if !gguf.is_undefined() {
        kiln_model::LoraAdapter::from_gguf_bytes(&name, &name, bytes(gguf, "gguf")?, config)
    } else {
        let text = (get("config")?.as_string()).ok_or_else(|| {
            err(format!(
                "{what}: give gguf, or config (adapter_config.json's text) and safetensors"
            ))
        })?;
        let b = bytes(get("safetensors")?, "safetensors")?;
        kiln_model::LoraAdapter::from_peft_bytes(&name, &name, &text, b, config)
    };
    adapter.map_err(err)
}

/// Tokens a generation gets when `max_tokens` is not given (fewer if the context is shorter).
pub(crate) const DEFAULT_MAX_TOKENS: usize = 256;

/// `start`'s parameters: the server's generation fields and structured-output fields, and
/// (for `start_chat`) chat's tool fields and template variables; nothing else.
#[derive(serde::Deserialize, Default)]
pub(crate) struct StartParams {
    #[serde(flatten)]
    pub generation: GenerationParams,
    /// OpenAI's `{"type": "json_object" | "json_schema", ...}`.
    pub response_format: Option<serde_json::Value>,
    /// vLLM's `{"json" | "regex" | "choice" | "grammar": ...}`.
    pub structured_outputs: Option<serde_json::Value>,
    /// `think` or `none`: whether the reply's `<think>` block is set apart (default: where the
    /// model's chat template knows the tags).
    pub reasoning: Option<String>,
    /// vLLM's `thinking_token_budget`: at most this many tokens of reasoning, then its
    /// closing tag written for the model.
    pub thinking_token_budget: Option<usize>,
    /// Chat's `logprobs` and `top_logprobs`: each event's token with its log-probability and
    /// this many alternatives.
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<u32>,
    /// Chat's tools (`start_chat` only): `tools`, `tool_choice`, `parallel_tool_calls`.
    pub tools: Option<serde_json::Value>,
    pub tool_choice: Option<serde_json::Value>,
    pub parallel_tool_calls: Option<bool>,
    /// Variables for the chat template (`start_chat` only), as the server's chat takes them:
    /// Qwen3's `enable_thinking`, Llama 3's `date_string`, ...
    pub chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// The LoRA adapter the generation runs through, by the name `loadModel`'s `lora` gave it.
    pub lora: Option<String>,
    #[serde(flatten)]
    extra: std::collections::BTreeMap<String, serde_json::Value>,
}

impl StartParams {
    /// The first field only a chat takes (tools, template variables), if any is given.
    pub fn chat_field(&self) -> Option<&'static str> {
        [
            ("tools", self.tools.is_some()),
            ("tool_choice", self.tool_choice.is_some()),
            ("parallel_tool_calls", self.parallel_tool_calls.is_some()),
            ("chat_template_kwargs", self.chat_template_kwargs.is_some()),
        ]
        .into_iter()
        .find_map(|(name, given)| given.then_some(name))
    }
}

pub(crate) fn start_params(obj: &JsValue) -> Result<StartParams, JsValue> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(StartParams::default());
    }
    let json: String = js_sys::JSON::stringify(obj)?.into();
    let p: StartParams = serde_json::from_str(&json).map_err(|e| err(format!("params: {e}")))?;
    match p.extra.keys().next() {
        Some(k) => Err(err(format!("params: `{k}` is not a generation parameter"))),
        None => Ok(p),
    }
}
