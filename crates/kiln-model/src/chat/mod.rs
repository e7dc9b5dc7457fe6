//! Chat: the OpenAI message shape a chat template reads, the template itself (rendered the way
//! Hugging Face transformers renders it), and the JSON encoder its `tojson` filter uses.

mod py_json;
mod template;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use template::{ChatInput, ChatTemplate};

/// One chat turn, as a chat template sees it. Fields that are absent stay absent in the
/// template (`'tool_calls' in message` is false), as they are in a Python dict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// `None` (the template sees `none`) for an assistant turn that only calls tools.
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// On a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// On a `tool` message: the function that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// On an assistant message: its reasoning, apart from its content (Qwen3's templates
    /// render it for the turns after the last user message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: Some(content.into()),
            tool_calls: None,
            tool_call_id: None,
            name: None,
            reasoning_content: None,
        }
    }

    /// The text of the turn; empty when it has none.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}

/// A call an assistant turn made. `arguments` is a JSON object here, not the string the
/// OpenAI API carries, so templates that `tojson` it do not encode it twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: Value,
}
