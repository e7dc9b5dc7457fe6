//! The body of `POST /v1/responses`, checked and turned into the chat request kiln already
//! serves: the conversation's items become chat messages (`items.rs`), flat function tools
//! the chat API's nested ones, `text.format` a `response_format`. What kiln does not do is
//! refused by name rather than ignored.

use std::collections::BTreeMap;

use kiln_frontend::GenerationParams;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::items;
use crate::api::ChatRequest;
use crate::error::ApiError;

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum Input {
    Text(String),
    Items(Vec<Value>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct ResponsesRequest {
    pub model: Option<String>,
    pub input: Input,
    /// A system message before the conversation (not carried to later responses).
    pub instructions: Option<String>,
    /// The stored response this one continues: its conversation comes before `input`.
    pub previous_response_id: Option<String>,
    pub max_output_tokens: Option<i64>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", ...}}`.
    pub text: Option<Value>,
    /// Whether to keep the response for `previous_response_id` and `GET` (default: yes,
    /// where the server keeps any).
    pub store: Option<bool>,
    pub stream: Option<bool>,
    /// Echoed in the response.
    pub metadata: Option<Value>,
    /// Further variables for the chat template (vLLM's field), as in chat.
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub reasoning: Option<Value>,
    pub truncation: Option<String>,
    /// Extra output to include; kiln serves `message.output_text.logprobs`.
    pub include: Option<Vec<String>>,
    /// Alternatives per token (0 to 20) in the included log-probabilities.
    pub top_logprobs: Option<u32>,
    /// Generated in a task of its own, followed by id (`background.rs`).
    pub background: Option<bool>,
    /// The generation knobs every front end shares (`n` and `max_tokens` excepted).
    #[serde(flatten)]
    pub sampling: GenerationParams,
    /// Everything else, refused by name (`reject_unknown`).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

fn bad(param: &str, m: impl Into<String>) -> ApiError {
    ApiError::bad_param(param, m)
}

/// The `include` value that asks for the answer's log-probabilities.
const LOGPROBS: &str = "message.output_text.logprobs";

impl ResponsesRequest {
    /// Whether the answer's tokens come with their log-probabilities (`output_text.logprobs`).
    pub fn wants_logprobs(&self) -> bool {
        self.include.iter().flatten().any(|i| i == LOGPROBS)
    }

    /// The new input as items (a string is one user message).
    pub fn input_items(&self) -> Vec<Value> {
        match &self.input {
            Input::Text(t) => vec![json!({"type": "message", "role": "user", "content": t})],
            Input::Items(items) => items.clone(),
        }
    }

    /// The chat request for the conversation `history` (a stored one's items) followed by
    /// this request's input.
    pub fn to_chat(&self, history: &[Value]) -> Result<ChatRequest, ApiError> {
        let mut all = history.to_vec();
        all.extend(self.input_items());
        let tools = self
            .tools
            .as_ref()
            .map(|ts| Value::Array(ts.iter().map(chat_tool).collect()));
        let tool_choice = self.tool_choice.as_ref().map(|c| match c {
            Value::Object(o) if o.get("type") == Some(&json!("function")) => {
                json!({"type": "function", "function": {"name": o.get("name")}})
            }
            other => other.clone(),
        });
        Ok(ChatRequest {
            thinking_token_budget: None,
            reasoning_effort: self.effort(),
            add_generation_prompt: None,
            continue_final_message: None,
            model: self.model.clone(),
            messages: items::messages(self.instructions.as_deref(), &all)?,
            max_completion_tokens: self.max_output_tokens,
            logprobs: self.wants_logprobs().then_some(true),
            top_logprobs: self.top_logprobs.filter(|_| self.wants_logprobs()),
            response_format: self.response_format()?,
            structured_outputs: None,
            tools,
            tool_choice,
            parallel_tool_calls: self.parallel_tool_calls,
            chat_template_kwargs: self.chat_template_kwargs.clone(),
            stream: self.stream,
            stream_options: None,
            kv_transfer_params: None,
            return_tokens_as_token_ids: None,
            echo: None,
            sampling: self.sampling.clone(),
            beam: Default::default(),
            extra: self.extra.clone(),
        })
    }

    /// Refuses fields of the API (or of the shared knobs) that kiln's responses do not serve.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.sampling.n.is_some_and(|n| n != 1) {
            return Err(bad(
                "n",
                "a response has one output; send one request per output",
            ));
        }
        if self.sampling.max_tokens.is_some() {
            return Err(bad("max_tokens", "responses take max_output_tokens"));
        }
        if self.sampling.prompt_logprobs.is_some() {
            return Err(bad(
                "prompt_logprobs",
                "prompt_logprobs is served by /v1/completions",
            ));
        }
        let other = (self.include.iter().flatten()).find(|i| *i != LOGPROBS);
        if let Some(i) = other {
            return Err(bad(
                "include",
                format!("include `{i}` is not supported (only `{LOGPROBS}`)"),
            ));
        }
        if self.top_logprobs.is_some() && !self.wants_logprobs() {
            return Err(bad(
                "top_logprobs",
                format!(
                    "top_logprobs comes with the log-probabilities: add include: [\"{LOGPROBS}\"]"
                ),
            ));
        }
        if let Some(t) = self.truncation.as_deref().filter(|t| *t != "disabled") {
            return Err(bad(
                "truncation",
                format!(
                    "truncation `{t}` is not supported (disabled: a conversation longer than the context is refused)"
                ),
            ));
        }
        // `effort` goes to the template as the chat API's `reasoning_effort`.
        if let Some(Value::Object(r)) = &self.reasoning
            && let Some((k, _)) = r.iter().find(|(k, v)| !v.is_null() && *k != "effort")
        {
            return Err(bad(
                &format!("reasoning.{k}"),
                "only reasoning.effort is supported (given to a chat template that reads reasoning_effort)",
            ));
        }
        if let Some(e) = self.reasoning.as_ref().map(|r| &r["effort"])
            && !(e.is_null() || e.is_string())
        {
            return Err(bad("reasoning.effort", "reasoning.effort is a string"));
        }
        Ok(())
    }

    /// `reasoning.effort`, where set.
    fn effort(&self) -> Option<String> {
        let effort = self.reasoning.as_ref()?.get("effort")?;
        effort.as_str().map(str::to_string)
    }

    /// `text.format` as the chat API's `response_format`.
    fn response_format(&self) -> Result<Option<Value>, ApiError> {
        let Some(text) = self.text.as_ref().filter(|t| !t.is_null()) else {
            return Ok(None);
        };
        let Some(t) = text.as_object() else {
            return Err(bad("text", "text must be an object"));
        };
        if let Some((k, _)) = t.iter().find(|(k, v)| *k != "format" && !v.is_null()) {
            return Err(bad(
                &format!("text.{k}"),
                format!("text.{k} is not supported"),
            ));
        }
        Ok(match t.get("format").filter(|f| !f.is_null()) {
            None => None,
            Some(f) if f.get("type") == Some(&json!("json_schema")) => {
                let mut schema = f.as_object().cloned().unwrap_or_default();
                schema.remove("type");
                Some(json!({"type": "json_schema", "json_schema": schema}))
            }
            Some(f) => Some(f.clone()),
        })
    }
}

/// A Responses function tool (`{"type": "function", "name", ...}`) in the chat API's form;
/// other tools pass as they are (and are refused by type).
fn chat_tool(tool: &Value) -> Value {
    match tool.as_object() {
        Some(t) if t.get("type") == Some(&json!("function")) => {
            let mut f = t.clone();
            f.remove("type");
            json!({"type": "function", "function": f})
        }
        _ => tool.clone(),
    }
}

/// An error of the chat path, its parameter named as this API names it.
pub fn renamed(mut e: ApiError) -> ApiError {
    e.param = e.param.map(|p| {
        match p.as_str() {
            "messages" => "input",
            "max_completion_tokens" | "max_tokens" => "max_output_tokens",
            "response_format" => "text.format",
            "reasoning_effort" => "reasoning.effort",
            other => other,
        }
        .to_string()
    });
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: Value) -> ResponsesRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn tools_choice_and_format_take_the_chat_forms() {
        let r = req(json!({"input": "hi", "max_output_tokens": 9,
            "tools": [{"type": "function", "name": "get", "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "get"},
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}}));
        r.check().unwrap();
        let c = r.to_chat(&[]).unwrap();
        assert_eq!(c.tools.unwrap()[0]["function"]["name"], "get");
        assert_eq!(c.tool_choice.unwrap()["function"]["name"], "get");
        assert_eq!(
            c.response_format.unwrap(),
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})
        );
        assert_eq!(c.max_completion_tokens, Some(9));
        assert_eq!(c.messages.len(), 1);
        let e = req(json!({"input": "x", "text": {"verbosity": "low"}}))
            .to_chat(&[])
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("text.verbosity"));
    }

    #[test]
    fn what_is_not_served_is_named() {
        for (body, param) in [
            (json!({"input": "x", "n": 2}), "n"),
            (json!({"input": "x", "max_tokens": 2}), "max_tokens"),
            (
                json!({"input": "x", "include": ["reasoning.encrypted_content"]}),
                "include",
            ),
            (json!({"input": "x", "truncation": "auto"}), "truncation"),
            (json!({"input": "x", "top_logprobs": 2}), "top_logprobs"),
            (
                json!({"input": "x", "reasoning": {"summary": "auto"}}),
                "reasoning.summary",
            ),
            (
                json!({"input": "x", "reasoning": {"effort": 3}}),
                "reasoning.effort",
            ),
        ] {
            let e = req(body).check().unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{}", e.message);
        }
        // Unset and neutral values pass.
        let ok = json!({"input": "x", "n": 1, "background": false, "include": [], "truncation": "disabled",
            "reasoning": {"effort": null}, "text": {"format": {"type": "text"}}});
        let ok = req(ok);
        ok.check().unwrap();
        // The answer's log-probabilities, with alternatives, are the chat request's.
        let lp = req(
            json!({"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 3}),
        );
        lp.check().unwrap();
        let c = lp.to_chat(&[]).unwrap();
        assert_eq!((c.logprobs, c.top_logprobs), (Some(true), Some(3)));
        assert!(ok.to_chat(&[]).unwrap().response_format.unwrap()["type"] == "text");
    }
}
