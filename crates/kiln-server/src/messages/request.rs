//! The body of `POST /v1/messages` (Anthropic's Messages API), checked and turned into the
//! chat request kiln serves: content blocks become chat messages (`thinking` the assistant
//! turn's reasoning, `tool_use` its calls, `tool_result` tool messages), `tools` with an
//! `input_schema` the chat API's functions, `stop_sequences` stop strings. What kiln does not
//! do is refused by name.

use std::collections::BTreeMap;

use kiln_frontend::{GenerationParams, StopSpec};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::{ChatMessageIn, ChatRequest, MessageContent};
use crate::error::ApiError;

#[derive(Deserialize, Debug, Clone)]
pub struct MessagesRequest {
    pub model: Option<String>,
    /// Required by `/v1/messages`, not by `count_tokens`.
    pub max_tokens: Option<i64>,
    pub messages: Vec<MessageIn>,
    /// A string or text blocks.
    pub system: Option<Value>,
    pub stop_sequences: Option<Vec<String>>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    /// kiln's extension, as in chat: the sampler's seed.
    pub seed: Option<i64>,
    pub stream: Option<bool>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub thinking: Option<Value>,
    /// Further variables for the chat template (vLLM's field), as in chat.
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// Everything else, refused by name (`reject_unknown`) but for fields that change
    /// nothing kiln does (`metadata`, a user id).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Deserialize, Debug, Clone)]
pub struct MessageIn {
    pub role: String,
    /// A string or content blocks.
    pub content: Value,
}

fn bad(param: &str, m: impl Into<String>) -> ApiError {
    ApiError::bad_param(param, m)
}

impl MessagesRequest {
    /// `thinking`: whether the template is told to think, and the reasoning budget.
    /// `{"type": "enabled", "budget_tokens": N}` (1 <= N < `max_tokens`, as Anthropic's API
    /// asks) bounds a reasoning model's `<think>` block to N tokens; a model that does not
    /// reason writes none. `{"type": "disabled"}` tells the template not to think.
    fn thinking(&self, max_tokens: i64) -> Result<(Option<bool>, Option<i64>), ApiError> {
        let Some(t) = self.thinking.as_ref().filter(|t| !t.is_null()) else {
            return Ok((None, None));
        };
        match t["type"].as_str() {
            Some("disabled") => Ok((Some(false), None)),
            Some("enabled") => match t["budget_tokens"].as_i64() {
                Some(n) if (1..max_tokens).contains(&n) => Ok((Some(true), Some(n))),
                Some(n) => Err(bad(
                    "thinking",
                    format!(
                        "budget_tokens must be at least 1 and less than max_tokens ({max_tokens}), not {n}"
                    ),
                )),
                None => Err(bad(
                    "thinking",
                    "thinking {\"type\": \"enabled\"} needs budget_tokens, an integer",
                )),
            },
            _ => Err(bad(
                "thinking",
                format!(
                    "thinking is {{\"type\": \"enabled\", \"budget_tokens\": N}} or {{\"type\": \"disabled\"}}, not {t}"
                ),
            )),
        }
    }

    /// The chat request, generating at most `max_tokens`.
    pub fn to_chat(&self, max_tokens: i64) -> Result<ChatRequest, ApiError> {
        let (enable_thinking, budget) = self.thinking(max_tokens)?;
        // Templates that switch thinking (Qwen3's) are told, unless the request says itself.
        let mut kwargs = self.chat_template_kwargs.clone();
        if let Some(on) = enable_thinking {
            kwargs
                .get_or_insert_with(Default::default)
                .entry("enable_thinking")
                .or_insert(json!(on));
        }
        let mut messages = Vec::new();
        if let Some(system) = self.system.as_ref().filter(|s| !s.is_null()) {
            messages.push(ChatMessageIn::text(
                "system",
                Some(text_blocks(system, "system")?),
            ));
        }
        for m in &self.messages {
            match m.role.as_str() {
                "user" => user_turn(&m.content, &mut messages)?,
                "assistant" => messages.push(assistant_turn(&m.content)?),
                other => {
                    return Err(bad(
                        "messages",
                        format!("a message's role is user or assistant, not `{other}`"),
                    ));
                }
            }
        }
        let tools = match &self.tools {
            None => None,
            Some(ts) => Some(Value::Array(
                ts.iter().map(chat_tool).collect::<Result<_, _>>()?,
            )),
        };
        let (tool_choice, parallel) = match &self.tool_choice {
            None => (None, None),
            Some(c) => {
                let parallel = c["disable_parallel_tool_use"].as_bool().map(|d| !d);
                let choice = match (c["type"].as_str(), c["name"].as_str()) {
                    (Some("auto"), _) => json!("auto"),
                    (Some("any"), _) => json!("required"),
                    (Some("none"), _) => json!("none"),
                    (Some("tool"), Some(name)) => {
                        json!({"type": "function", "function": {"name": name}})
                    }
                    _ => {
                        return Err(bad(
                            "tool_choice",
                            "tool_choice is {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", \"name\"}",
                        ));
                    }
                };
                (Some(choice), parallel)
            }
        };
        let prefill = messages.last().is_some_and(|m| m.role == "assistant");
        Ok(ChatRequest {
            model: self.model.clone(),
            messages,
            max_completion_tokens: Some(max_tokens),
            logprobs: None,
            top_logprobs: None,
            response_format: None,
            structured_outputs: None,
            tools,
            tool_choice,
            parallel_tool_calls: parallel,
            chat_template_kwargs: kwargs,
            thinking_token_budget: budget,
            reasoning_effort: None,
            add_generation_prompt: None,
            // A final assistant message is a prefill: the reply goes on from its text.
            continue_final_message: Some(prefill),
            stream: self.stream,
            stream_options: None,
            kv_transfer_params: None,
            return_tokens_as_token_ids: None,
            echo: None,
            sampling: GenerationParams {
                temperature: self.temperature,
                top_p: self.top_p,
                top_k: self.top_k,
                seed: self.seed,
                stop: self.stop_sequences.clone().map(StopSpec::Many),
                ..GenerationParams::default()
            },
            beam: Default::default(),
            extra: self.extra.clone(),
        })
    }
}

/// The blocks of a content field (a string is one text block).
fn blocks(content: &Value) -> Result<Vec<Value>, ApiError> {
    match content {
        Value::String(s) => Ok(vec![json!({"type": "text", "text": s})]),
        Value::Array(b) => Ok(b.clone()),
        _ => Err(bad("messages", "content is a string or an array of blocks")),
    }
}

/// Text blocks' text, joined.
fn text_blocks(content: &Value, param: &str) -> Result<String, ApiError> {
    let mut s = String::new();
    for b in blocks(content)? {
        match (b["type"].as_str(), b["text"].as_str()) {
            (Some("text"), Some(t)) => s.push_str(t),
            (kind, _) => {
                return Err(bad(
                    param,
                    format!(
                        "content blocks of type `{}` are not supported here (text)",
                        kind.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    Ok(s)
}

/// A user turn: its tool results as tool messages, then its text as a user message.
fn user_turn(content: &Value, out: &mut Vec<ChatMessageIn>) -> Result<(), ApiError> {
    let mut text = None::<String>;
    for b in blocks(content)? {
        match b["type"].as_str() {
            Some("text") => text
                .get_or_insert_with(String::new)
                .push_str(b["text"].as_str().unwrap_or("")),
            Some("tool_result") => {
                let id = b["tool_use_id"]
                    .as_str()
                    .ok_or_else(|| bad("messages", "a tool_result block needs its tool_use_id"))?;
                let result = match &b["content"] {
                    Value::Null => String::new(),
                    c => text_blocks(c, "messages")?,
                };
                let mut m = ChatMessageIn::text("tool", Some(result));
                m.tool_call_id = Some(id.to_string());
                out.push(m);
            }
            other => {
                return Err(bad(
                    "messages",
                    format!(
                        "user content blocks of type `{}` are not supported (text, tool_result)",
                        other.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    if let Some(t) = text {
        out.push(ChatMessageIn::text("user", Some(t)));
    }
    Ok(())
}

/// An assistant turn: its thinking as reasoning, its text, its tool uses as calls.
fn assistant_turn(content: &Value) -> Result<ChatMessageIn, ApiError> {
    let mut m = ChatMessageIn::text("assistant", None);
    let mut text = None::<String>;
    for b in blocks(content)? {
        match b["type"].as_str() {
            Some("text") => text
                .get_or_insert_with(String::new)
                .push_str(b["text"].as_str().unwrap_or("")),
            Some("thinking") => {
                m.reasoning_content = Some(b["thinking"].as_str().unwrap_or("").to_string())
            }
            Some("tool_use") => {
                let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str()) else {
                    return Err(bad("messages", "a tool_use block needs its id and name"));
                };
                let arguments = serde_json::to_string(&b["input"]).unwrap_or_default();
                m.tool_calls.get_or_insert_with(Vec::new).push(
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}),
                );
            }
            other => {
                return Err(bad(
                    "messages",
                    format!(
                        "assistant content blocks of type `{}` are not supported (text, thinking, tool_use)",
                        other.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    m.content = text.map(MessageContent::Text);
    Ok(m)
}

/// A client tool (`{"name", "description", "input_schema"}`) as a chat function; server
/// tools (web search and the like, which have a `type`) are refused.
fn chat_tool(tool: &Value) -> Result<Value, ApiError> {
    if let Some(kind) = tool["type"].as_str().filter(|t| *t != "custom") {
        return Err(bad(
            "tools",
            format!("tool type `{kind}` is not supported (client tools with an input_schema)"),
        ));
    }
    let name = tool["name"]
        .as_str()
        .ok_or_else(|| bad("tools", "a tool needs a name"))?;
    let mut f = json!({"name": name, "parameters": tool.get("input_schema").cloned().unwrap_or(json!({"type": "object"}))});
    if let Some(d) = tool.get("description") {
        f["description"] = d.clone();
    }
    Ok(json!({"type": "function", "function": f}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: Value) -> MessagesRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_tool_loop_becomes_chat_messages() {
        let r = req(
            json!({"max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
            "tools": [{"name": "get", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "stop_sequences": ["END"],
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "Ask the tool.", "signature": ""},
                    {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "rain"}]},
                    {"type": "text", "text": "And tomorrow?"}]},
            ]}),
        );
        let c = r.to_chat(9).unwrap();
        let roles: Vec<&str> = c.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        let a = &c.messages[2];
        assert_eq!(a.reasoning_content.as_deref(), Some("Ask the tool."));
        assert_eq!(
            a.tool_calls.as_ref().unwrap()[0]["function"]["arguments"],
            "{\"city\":\"Oslo\"}"
        );
        assert!(matches!(&c.messages[3].content, Some(MessageContent::Text(t)) if t == "rain"));
        assert_eq!(
            c.tools.unwrap()[0]["function"]["parameters"],
            json!({"type": "object"})
        );
        assert_eq!(
            (c.tool_choice.unwrap(), c.parallel_tool_calls),
            (json!("required"), Some(false))
        );
        assert_eq!(c.max_completion_tokens, Some(9));
        assert!(matches!(c.sampling.stop, Some(StopSpec::Many(ref s)) if s == &["END"]));
    }

    #[test]
    fn what_is_not_served_is_named() {
        for (body, param) in [
            (
                json!({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
                "messages",
            ),
            (
                json!({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]}),
                "messages",
            ),
            (
                json!({"max_tokens": 1, "messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
                "tools",
            ),
            (
                json!({"max_tokens": 1, "messages": [], "thinking": {"type": "enabled", "budget_tokens": 1024}}),
                "thinking",
            ),
            (
                json!({"max_tokens": 1, "messages": [], "tool_choice": {"type": "tool"}}),
                "tool_choice",
            ),
        ] {
            let e = req(body).to_chat(1).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{}", e.message);
        }
        for thinking in [
            json!({"type": "enabled"}),
            json!({"type": "adaptive"}),
            json!(true),
        ] {
            let body = json!({"max_tokens": 9, "messages": [], "thinking": thinking});
            let e = req(body).to_chat(9).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("thinking"), "{}", e.message);
        }
    }

    #[test]
    fn thinking_reaches_the_template_and_bounds_the_reasoning() {
        let chat = |thinking: Value, kwargs: Value| {
            let body = json!({"max_tokens": 9, "messages": [], "thinking": thinking,
                "chat_template_kwargs": kwargs});
            req(body).to_chat(9).unwrap()
        };
        let on = chat(json!({"type": "enabled", "budget_tokens": 4}), Value::Null);
        assert_eq!(on.thinking_token_budget, Some(4));
        assert_eq!(on.chat_template_kwargs.unwrap()["enable_thinking"], true);
        let off = chat(json!({"type": "disabled"}), Value::Null);
        assert_eq!(off.thinking_token_budget, None);
        assert_eq!(off.chat_template_kwargs.unwrap()["enable_thinking"], false);
        // The request's own template variable wins.
        let own = chat(
            json!({"type": "enabled", "budget_tokens": 8}),
            json!({"enable_thinking": false}),
        );
        assert_eq!(own.chat_template_kwargs.unwrap()["enable_thinking"], false);
        let none = chat(Value::Null, Value::Null);
        assert!(none.chat_template_kwargs.is_none() && none.thinking_token_budget.is_none());
    }
}
