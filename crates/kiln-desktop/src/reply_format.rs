//! A chat's reply format (LM Studio's structured output): free text, any JSON object, or JSON
//! valid under a schema the user writes. Kept with the chat as the user wrote it; turned into
//! the API's `response_format` and from there into a grammar by the shared front end, as the
//! server reads the same field.

use kiln_engine::Grammar;
use kiln_frontend::requested_grammar;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum FormatKind {
    #[default]
    Text,
    JsonObject,
    JsonSchema,
}

impl FormatKind {
    pub const ALL: [FormatKind; 3] = [
        FormatKind::Text,
        FormatKind::JsonObject,
        FormatKind::JsonSchema,
    ];

    pub fn label(self) -> &'static str {
        match self {
            FormatKind::Text => "Text",
            FormatKind::JsonObject => "JSON object",
            FormatKind::JsonSchema => "JSON schema",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct ReplyFormat {
    pub kind: FormatKind,
    /// The schema's text, kept as written (also while another kind is chosen).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub schema: String,
}

impl ReplyFormat {
    /// The API's `response_format` for this format; `None` for free text. A schema that is
    /// not JSON is an error saying where.
    pub fn response_format(&self) -> Result<Option<Value>, String> {
        match self.kind {
            FormatKind::Text => Ok(None),
            FormatKind::JsonObject => Ok(Some(json!({"type": "json_object"}))),
            FormatKind::JsonSchema => {
                let schema: Value = serde_json::from_str(&self.schema)
                    .map_err(|e| format!("the reply format's JSON schema is not JSON: {e}"))?;
                Ok(Some(json!({
                    "type": "json_schema",
                    "json_schema": {"name": "reply", "schema": schema},
                })))
            }
        }
    }

    /// The grammar replies are held to; `None` for free text.
    pub fn grammar(&self) -> Result<Option<Grammar>, String> {
        match self.response_format()? {
            None => Ok(None),
            Some(rf) => requested_grammar(Some(&rf), None).map_err(|e| e.to_string()),
        }
    }
}
