//! Request types of the OpenAI API (what kiln reads); the generation knobs both endpoints
//! share are kiln-frontend's `GenerationParams`. Responses are built as JSON values in the route files.

use std::collections::BTreeMap;

use kiln_frontend::{Ending, GenerationParams};
use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::kv_transfer::KvTransferParams;

/// Fields OpenAI clients send that change nothing kiln does (accepted and ignored). Any other
/// field kiln does not read gets a 400 naming it.
pub const ACCEPTED_NO_OPS: &[&str] = &[
    "user",
    "store",
    "metadata",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
];

/// Fails with a 400 naming the first field outside the API kiln implements (nulls pass: they
/// mean "not set").
pub fn reject_unknown(extra: &BTreeMap<String, Value>) -> Result<(), ApiError> {
    match extra
        .iter()
        .find(|(k, v)| !v.is_null() && !ACCEPTED_NO_OPS.contains(&k.as_str()))
    {
        Some((k, _)) => Err(ApiError::bad_param(
            k,
            format!("`{k}` is not supported by this server"),
        )),
        None => Ok(()),
    }
}

impl ChatRequest {
    /// How the rendered conversation ends (`add_generation_prompt`,
    /// `continue_final_message`).
    pub fn ending(&self) -> Result<Ending, ApiError> {
        match (self.add_generation_prompt, self.continue_final_message) {
            (Some(true), Some(true)) => Err(ApiError::bad_param(
                "continue_final_message",
                "continue_final_message continues the last message, so add_generation_prompt cannot also be true",
            )),
            (_, Some(true)) => Ok(Ending::ContinueLast),
            (Some(false), _) => Ok(Ending::AsIs),
            _ => Ok(Ending::NewTurn),
        }
    }
}

/// `stream_options`; options it does not name are refused by name.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// A last chunk with the whole request's usage.
    pub include_usage: Option<bool>,
    /// vLLM's: every chunk carries its choice's usage so far (with `include_usage` or
    /// without).
    pub continuous_usage_stats: Option<bool>,
}

impl StreamOptions {
    /// Whether to send the last usage chunk (always when `force`: the server's
    /// `--enable-force-include-usage`), and usage on every chunk.
    pub fn usage(options: Option<&StreamOptions>, force: bool) -> (bool, bool) {
        let o = options.cloned().unwrap_or_default();
        (
            force || o.include_usage.unwrap_or(false),
            o.continuous_usage_stats.unwrap_or(false),
        )
    }
}

pub use kiln_frontend::tools::MessageContent;

#[derive(Deserialize, Debug, Clone)]
pub struct ChatMessageIn {
    pub role: String,
    pub content: Option<MessageContent>,
    /// An assistant turn's tool calls (`{"id", "type", "function": {"name", "arguments"}}`).
    pub tool_calls: Option<Vec<Value>>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
    /// An assistant turn's reasoning, as replies carry it (for templates that render it).
    pub reasoning_content: Option<String>,
}

impl ChatMessageIn {
    /// A message of `role` with text `content` (none: no content) and nothing else.
    pub fn text(role: &str, content: Option<String>) -> Self {
        ChatMessageIn {
            role: role.to_string(),
            content: content.map(MessageContent::Text),
            tool_calls: None,
            tool_call_id: None,
            name: None,
            reasoning_content: None,
        }
    }
}

#[derive(Deserialize, Debug, Clone)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessageIn>,
    pub max_completion_tokens: Option<i64>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<u32>,
    /// OpenAI's `{"type": "text" | "json_object" | "json_schema", ...}`.
    pub response_format: Option<Value>,
    /// vLLM's `{"json" | "regex" | "choice" | "grammar": ...}`.
    pub structured_outputs: Option<Value>,
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    /// Further variables for the chat template (vLLM's field), e.g. `{"enable_thinking":
    /// false}` or a fixed `date_string`.
    pub chat_template_kwargs: Option<serde_json::Map<String, Value>>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    /// Prefill/decode split (llm-d's field; see `kv_transfer`).
    pub kv_transfer_params: Option<KvTransferParams>,
    /// vLLM's: tokens in log-probabilities written `token_id:{id}` (a token whose bytes are
    /// not whole UTF-8 characters is then still told apart).
    pub return_tokens_as_token_ids: Option<bool>,
    /// OpenAI's `none` | `minimal` | `low` | `medium` | `high`, given to a chat template that
    /// reads `reasoning_effort` (gpt-oss's), as vLLM does; refused for one that does not.
    pub reasoning_effort: Option<String>,
    /// vLLM's: at most this many tokens of reasoning in a `<think>` block (its closing tag
    /// included), after which `</think>` is written for the model.
    pub thinking_token_budget: Option<i64>,
    /// vLLM's: `false` renders the conversation without the assistant turn's header.
    pub add_generation_prompt: Option<bool>,
    /// vLLM's: the reply continues the final (assistant) message instead of starting a turn.
    pub continue_final_message: Option<bool>,
    /// vLLM's: where the final message is the assistant's, the reply's content starts with
    /// its text.
    pub echo: Option<bool>,
    /// The generation knobs every front end shares.
    #[serde(flatten)]
    pub sampling: GenerationParams,
    /// vLLM's beam search fields.
    #[serde(flatten)]
    pub beam: BeamFields,
    /// Everything else, checked by [`reject_unknown`].
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// vLLM's beam search fields (`beam_search.rs`).
#[derive(Deserialize, Debug, Clone, Copy, Default)]
pub struct BeamFields {
    pub use_beam_search: Option<bool>,
    /// Beams rank by log-probability over length to this power.
    pub length_penalty: Option<f32>,
    /// Stop once `n` beams are done.
    pub early_stopping: Option<bool>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    pub logprobs: Option<u32>,
    pub echo: Option<bool>,
    /// OpenAI's `response_format`, as in chat.
    pub response_format: Option<Value>,
    /// vLLM's `structured_outputs`, as in chat.
    pub structured_outputs: Option<Value>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    /// Prefill/decode split, as in chat.
    pub kv_transfer_params: Option<KvTransferParams>,
    /// vLLM's: tokens in log-probabilities written `token_id:{id}` (a token whose bytes are
    /// not whole UTF-8 characters is then still told apart).
    pub return_tokens_as_token_ids: Option<bool>,
    /// The generation knobs every front end shares.
    #[serde(flatten)]
    pub sampling: GenerationParams,
    /// vLLM's beam search fields, as in chat.
    #[serde(flatten)]
    pub beam: BeamFields,
    /// Everything else, checked by [`reject_unknown`].
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub messages: Option<Vec<ChatMessageIn>>,
    pub add_special_tokens: Option<bool>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<u32>,
}
