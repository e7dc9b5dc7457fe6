//! A conversation with tools rendered for the model: [`ChatTurn`]s (OpenAI's chat messages,
//! their content as text) checked and handed to the chat template, assistant turns' past calls
//! as the template's data or, in the generic format, as that format's JSON.

use std::collections::HashMap;

use kiln_model::ChatMessage;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ToolPlan, calls_as_text, past_calls};
use crate::{ChatExtras, Ending, Frontend, ParamError};

/// One chat message as OpenAI's API writes it.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct ChatTurn {
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

/// A message's content: text, or OpenAI's content parts, of which kiln reads text parts.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize, Debug, Clone)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

impl MessageContent {
    /// The text: the string, or the text parts joined; another kind of part is an error.
    pub fn text(&self) -> Result<String, ParamError> {
        match self {
            MessageContent::Text(t) => Ok(t.clone()),
            MessageContent::Parts(parts) => parts
                .iter()
                .map(|p| match (&*p.kind, &p.text) {
                    ("text", Some(t)) => Ok(t.as_str()),
                    _ => Err(bad(format!(
                        "content parts of type `{}` are not supported",
                        p.kind
                    ))),
                })
                .collect(),
        }
    }
}

fn bad(why: impl Into<String>) -> ParamError {
    ParamError::new("messages", why)
}

impl Frontend {
    /// Renders `turns` with the tools of `plan`: given to a template that renders them, or
    /// described in the system message (the generic format). Assistant turns' past calls go
    /// to a native template as data, and are written as the generic format's JSON otherwise.
    /// `kwargs`: the request's `chat_template_kwargs`; `ending`: how the rendered conversation
    /// ends.
    pub fn render_turns(
        &self,
        turns: Vec<ChatTurn>,
        plan: Option<&ToolPlan>,
        kwargs: Option<&Map<String, Value>>,
        ending: Ending,
    ) -> Result<String, ParamError> {
        let format = self.tool_format;
        let native = format.is_native();
        let mut msgs = Vec::with_capacity(turns.len() + 1);
        // Tool call ids the assistant turns so far made, with their function names.
        let mut calls_made = HashMap::new();
        for t in turns {
            if t.reasoning_content.is_some() && t.role != "assistant" {
                return Err(bad(format!(
                    "only assistant messages carry reasoning_content, not {} messages",
                    t.role
                )));
            }
            let calls = t.tool_calls.as_deref().filter(|c| !c.is_empty());
            if calls.is_some() && t.role != "assistant" {
                return Err(bad("only assistant messages carry tool_calls"));
            }
            check_tool_reply(&t, &calls_made)?;
            let mut msg = ChatMessage {
                role: t.role,
                content: t.content.as_ref().map(MessageContent::text).transpose()?,
                tool_calls: None,
                tool_call_id: t.tool_call_id.map(|id| format.template_call_id(&id)),
                name: t.name,
                reasoning_content: t.reasoning_content,
            };
            if let Some(calls) = calls {
                let mut calls = past_calls(calls)?;
                for c in &mut calls {
                    calls_made.insert(c.id.clone(), c.function.name.clone());
                    c.id = format.template_call_id(&c.id);
                }
                if native {
                    msg.tool_calls = Some(calls);
                } else {
                    msg.content = Some(calls_as_text(&calls));
                }
            }
            if !native && msg.content.is_none() {
                // Templates without tools concatenate content as a string.
                msg.content = Some(String::new());
            }
            msgs.push(msg);
        }
        let system = plan.and_then(ToolPlan::system_prompt);
        let tools = plan.and_then(ToolPlan::template_tools);
        let extras = ChatExtras {
            system: system.as_deref(),
            tools: tools.as_deref(),
            kwargs,
            ending,
        };
        self.render_chat(msgs, &extras)
    }
}

/// A `tool` message must answer a call that an earlier assistant message made (its
/// `tool_call_id`), and its `name`, when given, must be that call's function. `tool_call_id` on
/// other roles, and `name` on them (a participant name), are refused rather than ignored.
fn check_tool_reply(t: &ChatTurn, calls_made: &HashMap<String, String>) -> Result<(), ParamError> {
    match (t.role.as_str(), &t.tool_call_id) {
        ("tool", Some(id)) => match (calls_made.get(id), &t.name) {
            (None, _) => Err(bad(format!(
                "a tool message answers tool_call_id `{id}`, which no earlier assistant message made"
            ))),
            (Some(f), Some(name)) if name != f => Err(bad(format!(
                "the tool message for call `{id}` names `{name}`, but that call was to `{f}`"
            ))),
            _ => Ok(()),
        },
        ("tool", None) => Err(bad("a tool message needs the tool_call_id it answers")),
        (role, Some(_)) => Err(bad(format!(
            "only tool messages carry tool_call_id, not {role} messages"
        ))),
        (role, None) if t.name.is_some() => {
            Err(bad(format!("`name` on a {role} message is not supported")))
        }
        _ => Ok(()),
    }
}
