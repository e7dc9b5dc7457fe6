//! `serve`'s flags for what the API answers by default where a request does not say, and
//! for what its log says of requests, with vLLM's names.

use kiln_server::{ServerConfig, TEMPLATE_REQUEST_FIELDS};
use serde_json::{Map, Value};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ApiDefaults {
    /// Chat template variables every request gets unless its own `chat_template_kwargs` sets
    /// them, as a JSON object (vLLM's flag; `{"enable_thinking": false}` for a model that
    /// reasons only when asked).
    #[arg(long, value_name = "JSON", value_parser = template_kwargs)]
    default_chat_template_kwargs: Option<Map<String, Value>>,
    /// Log-probabilities name tokens `token_id:{id}` unless a request sets
    /// `return_tokens_as_token_ids` false (vLLM's flag).
    #[arg(long)]
    return_tokens_as_token_ids: bool,
    /// Every stream ends with a usage chunk, as if each request set
    /// `stream_options.include_usage` (vLLM's flag).
    #[arg(long)]
    enable_force_include_usage: bool,
    /// Log each generation request when it is queued: its prompt (text and token ids), its
    /// sampling parameters (vLLM's flag; off by default, prompts being users' data).
    #[arg(long)]
    enable_log_requests: bool,
    /// Log each sequence's output when it ends (vLLM's flag).
    #[arg(long)]
    enable_log_outputs: bool,
    /// Characters of prompts and outputs (and prompt token ids) the log shows at most.
    #[arg(long, value_name = "N")]
    max_log_len: Option<usize>,
}

/// A JSON object of template variables, none of them one that a request's own fields set.
fn template_kwargs(text: &str) -> Result<Map<String, Value>, String> {
    let kwargs: Map<String, Value> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
    match TEMPLATE_REQUEST_FIELDS
        .iter()
        .find(|k| kwargs.contains_key(**k))
    {
        Some(k) => Err(format!("`{k}` is set by each request's own field")),
        None => Ok(kwargs),
    }
}

impl ApiDefaults {
    /// Sets `config`'s defaults.
    pub fn apply(&self, config: &mut ServerConfig) {
        config.default_chat_template_kwargs = self
            .default_chat_template_kwargs
            .clone()
            .unwrap_or_default();
        config.return_tokens_as_token_ids = self.return_tokens_as_token_ids;
        config.force_include_usage = self.enable_force_include_usage;
        config.request_log = kiln_server::request_log::RequestLog {
            requests: self.enable_log_requests,
            outputs: self.enable_log_outputs,
            max_len: self.max_log_len,
        };
    }
}
