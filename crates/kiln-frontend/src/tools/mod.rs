//! Tool calling, for every front end that offers tools (the server's chat, Responses and
//! Messages APIs, the browser's chat). A model whose chat template renders tools gets
//! them through its template and writes calls in its own syntax ([`ToolFormat`]); `required`
//! and named calls are constrained to that syntax, and `auto` replies to free text in which
//! a call, once opened, must be well-formed. Other models
//! get the generic format (as llama.cpp's server uses for templates without tools): a system
//! message describes the tools and the reply format, and the output is constrained by a JSON
//! schema to either `{"tool_calls": [{"name", "arguments"}, ...]}` or `{"response": "..."}`
//! (`auto`), or to tool calls only (`required`, a named function). Either way the reply is
//! parsed back into OpenAI `tool_calls`.

mod format;
mod stream;
mod turns;

use kiln_core::Grammar;
use kiln_model::{FunctionCall, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ParamError;
pub use format::{MISTRAL_ARGS, MISTRAL_OPEN, ParamKinds, Reply, ToolFormat};
pub use stream::{Partial, Piece, ToolStream, partial, partial_typed};
pub use turns::{ChatTurn, ContentPart, MessageContent};

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ToolIn {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionIn,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct FunctionIn {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
    /// Accepted: kiln always constrains the arguments to `parameters`, as strict mode does.
    #[serde(rename = "strict")]
    pub _strict: Option<bool>,
}

/// What the request allows the model to do with its tools.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    None,
    Auto,
    Required,
    Named(String),
}

/// The tool setup of one request.
#[derive(Debug, Clone)]
pub struct ToolPlan {
    pub tools: Vec<FunctionIn>,
    /// The tools as the request wrote them, for templates that render them.
    pub raw: Vec<Value>,
    pub choice: Choice,
    pub parallel: bool,
    pub format: ToolFormat,
}

fn bad(param: &str, m: impl Into<String>) -> ParamError {
    ParamError::new(param, m)
}

impl ToolPlan {
    /// Checks `tools`, `tool_choice` and `parallel_tool_calls`; `None` when the request has
    /// no tools (a `tool_choice` other than `none` is then an error).
    pub fn parse(
        tools: Option<&Value>,
        choice: Option<&Value>,
        parallel: Option<bool>,
        format: ToolFormat,
    ) -> Result<Option<ToolPlan>, ParamError> {
        let raw: Vec<Value> = match tools {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(bad("tools", "tools must be an array")),
        };
        let tools: Vec<ToolIn> = serde_json::from_value(Value::Array(raw.clone()))
            .map_err(|e| bad("tools", format!("invalid tools: {e}")))?;
        for t in &tools {
            if t.kind != "function" {
                return Err(bad(
                    "tools",
                    format!("tool type `{}` is not supported (function)", t.kind),
                ));
            }
            if t.function.name.is_empty() {
                return Err(bad("tools", "a function needs a name"));
            }
            if let Some(p) = &t.function.parameters
                && !p.is_object()
            {
                return Err(bad(
                    "tools",
                    format!(
                        "the parameters of `{}` must be a JSON schema object",
                        t.function.name
                    ),
                ));
            }
        }
        let choice = match choice {
            None | Some(Value::Null) => {
                if tools.is_empty() {
                    Choice::None
                } else {
                    Choice::Auto
                }
            }
            Some(Value::String(s)) => match s.as_str() {
                "none" => Choice::None,
                "auto" => Choice::Auto,
                "required" => Choice::Required,
                other => {
                    return Err(bad(
                        "tool_choice",
                        format!("tool_choice `{other}` is not one of none, auto, required"),
                    ));
                }
            },
            Some(v) => {
                let name = v.pointer("/function/name").and_then(Value::as_str);
                match (v.get("type").and_then(Value::as_str), name) {
                    (Some("function"), Some(n)) => Choice::Named(n.to_string()),
                    _ => {
                        return Err(bad(
                            "tool_choice",
                            "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                        ));
                    }
                }
            }
        };
        if tools.is_empty() {
            return match choice {
                Choice::None => Ok(None),
                _ => Err(bad("tool_choice", "tool_choice needs tools")),
            };
        }
        if let Choice::Named(n) = &choice
            && !tools.iter().any(|t| t.function.name == *n)
        {
            return Err(bad(
                "tool_choice",
                format!("tool_choice names `{n}`, which is not among the tools"),
            ));
        }
        Ok(Some(ToolPlan {
            tools: tools.into_iter().map(|t| t.function).collect(),
            raw,
            choice,
            parallel: parallel.unwrap_or(true),
            format,
        }))
    }

    /// Whether the model is offered the tools at all.
    pub fn active(&self) -> bool {
        self.choice != Choice::None
    }

    fn offered(&self) -> Vec<&FunctionIn> {
        match &self.choice {
            Choice::Named(n) => self.tools.iter().filter(|t| t.name == *n).collect(),
            _ => self.tools.iter().collect(),
        }
    }

    fn parameters(t: &FunctionIn) -> Value {
        t.parameters.clone().unwrap_or(json!({"type": "object"}))
    }

    /// Which of the offered tools' parameters take strings.
    pub fn param_kinds(&self) -> ParamKinds {
        let offered = self.offered();
        let params: Vec<Value> = offered.iter().map(|t| Self::parameters(t)).collect();
        let named: Vec<(&str, Value)> = (offered.iter().zip(params))
            .map(|(t, p)| (t.name.as_str(), p))
            .collect();
        ParamKinds::new(&named)
    }

    /// The tools for a template that renders them (the offered ones, as the request wrote
    /// them); `None` in the generic format.
    pub fn template_tools(&self) -> Option<Vec<Value>> {
        let offered = self.offered();
        self.format.is_native().then(|| {
            self.tools
                .iter()
                .zip(&self.raw)
                .filter(|(t, _)| offered.iter().any(|o| o.name == t.name))
                .map(|(_, raw)| raw.clone())
                .collect()
        })
    }

    /// The system message text that describes the tools and the reply format, in the
    /// generic format (a native template describes them itself).
    pub fn system_prompt(&self) -> Option<String> {
        if self.format.is_native() {
            return None;
        }
        let list: Vec<Value> = self
            .offered()
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters.clone().unwrap_or(json!({"type": "object"}))}))
            .collect();
        let tools = serde_json::to_string_pretty(&list).unwrap_or_default();
        let call = r#"{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments>}}]}"#;
        Some(match self.choice {
            Choice::Auto => format!(
                "You can call these tools:\n{tools}\n\nReply with a JSON object: either {call} to call tools, or {{\"response\": \"<your answer>\"}} to answer directly."
            ),
            _ => format!(
                "You can call these tools:\n{tools}\n\nReply with a JSON object that calls a tool: {call}"
            ),
        })
    }

    /// The grammar of the reply.
    pub fn grammar(&self) -> Grammar {
        let single = !self.parallel || matches!(self.choice, Choice::Named(_));
        if self.format.is_native() {
            let offered: Vec<(&str, Value)> = self
                .offered()
                .into_iter()
                .map(|t| (t.name.as_str(), Self::parameters(t)))
                .collect();
            let auto = self.choice == Choice::Auto;
            return self.format.calls_grammar(&offered, auto, !single);
        }
        let alts: Vec<Value> = self
            .offered()
            .iter()
            .map(|t| {
                json!({
                    "type": "object",
                    "properties": {"name": {"const": t.name}, "arguments": t.parameters.clone().unwrap_or(json!({"type": "object"}))},
                    "required": ["name", "arguments"],
                    "additionalProperties": false,
                })
            })
            .collect();
        let mut calls = json!({"type": "array", "items": {"anyOf": alts}, "minItems": 1});
        if single {
            calls["maxItems"] = json!(1);
        }
        let call_obj = json!({"type": "object", "properties": {"tool_calls": calls}, "required": ["tool_calls"], "additionalProperties": false});
        match self.choice {
            Choice::Auto => Grammar::JsonSchema(json!({"anyOf": [
                call_obj,
                {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"], "additionalProperties": false},
            ]})),
            _ => Grammar::JsonSchema(call_obj),
        }
    }

    /// Parses a finished reply: `Ok((content, calls))` where each call is `(name, arguments
    /// as a JSON string)`; the raw text comes back as content when it is not a reply object
    /// (a reply cut by `max_tokens`).
    pub fn parse_reply(&self, text: &str) -> Reply {
        if self.format.is_native() {
            return self.format.parse_typed(text, &self.param_kinds());
        }
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return (Some(text.to_string()), Vec::new());
        };
        if let Some(calls) = v.get("tool_calls").and_then(Value::as_array) {
            let calls = calls
                .iter()
                .filter_map(|c| {
                    let name = c.get("name")?.as_str()?.to_string();
                    Some((
                        name,
                        c.get("arguments")
                            .map(compact_json)
                            .unwrap_or_else(|| "{}".into()),
                    ))
                })
                .collect();
            return (None, calls);
        }
        match v.get("response").and_then(Value::as_str) {
            Some(r) => (Some(r.to_string()), Vec::new()),
            None => (Some(text.to_string()), Vec::new()),
        }
    }

    /// `finish_reason` of a reply with tool calls: `stop` for a named function, as OpenAI.
    pub fn finish_reason(&self) -> &'static str {
        if matches!(self.choice, Choice::Named(_)) {
            "stop"
        } else {
            "tool_calls"
        }
    }

    /// A finished reply as chat answers it whole: its content, its calls as OpenAI's
    /// `tool_calls` (each with a fresh id) and its finish reason, the calls' where it called.
    /// A reply that did not end by itself (`finish` other than `stop`: cut by `max_tokens`)
    /// is its text as written.
    pub fn finished_reply<'a>(
        &self,
        text: &str,
        finish: &'a str,
    ) -> (Option<String>, Vec<Value>, &'a str) {
        let (content, calls) = match finish {
            "stop" => self.parse_reply(text),
            _ => (Some(text.to_string()), Vec::new()),
        };
        let calls: Vec<Value> = calls
            .into_iter()
            .map(|(name, args)| json!({"id": self.format.new_call_id(), "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
        let finish = match calls.is_empty() {
            true => finish,
            false => self.finish_reason(),
        };
        (content, calls, finish)
    }

    /// The finish reason of a streamed reply that `called` a tool or not: the calls' once it
    /// called and ended by itself; a reply cut by `max_tokens` stays `length`, calls or not.
    pub fn streamed_finish<'a>(&self, called: bool, finish: &'a str) -> &'a str {
        match called && finish == "stop" {
            true => self.finish_reason(),
            false => finish,
        }
    }
}

/// An assistant message's `tool_calls`, their arguments parsed back to JSON values (so a
/// template or the generic format does not encode them twice).
pub fn past_calls(calls: &[Value]) -> Result<Vec<ToolCall>, ParamError> {
    calls
        .iter()
        .map(|c| {
            let name = c
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("messages", "a tool call needs function.name"))?;
            let arguments = match c.pointer("/function/arguments") {
                Some(Value::String(s)) => serde_json::from_str(s).map_err(|e| {
                    bad(
                        "messages",
                        format!("tool call arguments of `{name}` are not JSON: {e}"),
                    )
                })?,
                Some(v) => v.clone(),
                None => json!({}),
            };
            Ok(ToolCall {
                id: c["id"].as_str().unwrap_or_default().to_string(),
                kind: "function".into(),
                function: FunctionCall {
                    name: name.to_string(),
                    arguments,
                },
            })
        })
        .collect()
}

/// Past calls as the generic format writes them.
pub fn calls_as_text(calls: &[ToolCall]) -> String {
    let out: Vec<Value> = calls
        .iter()
        .map(|c| json!({"name": c.function.name, "arguments": c.function.arguments}))
        .collect();
    compact_json(&json!({"tool_calls": out}))
}

/// JSON with the separators the grammar uses (`", "` and `": "`).
pub fn compact_json(v: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, SpacedFormatter);
    serde::Serialize::serialize(v, &mut ser).expect("a JSON value serializes");
    String::from_utf8(buf).expect("JSON is UTF-8")
}

struct SpacedFormatter;

impl serde_json::ser::Formatter for SpacedFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}
