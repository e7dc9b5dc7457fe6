//! How a model writes tool calls. A chat template that reads `tools` describes them itself
//! and was trained on its own call syntax: Hermes-style `<tool_call>{..}</tool_call>` blocks
//! (Qwen2.5, Qwen3, Hermes) or Llama 3.x's bare `{"name": .., "parameters": {..}}`. Templates
//! without tools get kiln's generic format (see `tools.rs`). Detected from the template text.

use kiln_engine::{Grammar, compact_schema};
use kiln_model::ChatTemplate;
use serde_json::{Value, json};

use crate::tools::compact_json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// kiln's: tools in a system message, replies `{"tool_calls": [..]}` or `{"response": ..}`.
    Generic,
    /// `<tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>`, one block per call.
    Hermes,
    /// `{"name": .., "parameters": {..}}`, one call per turn.
    Llama3,
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";

/// A parsed reply: its text (`None` when only calls) and its calls as `(name, arguments as
/// JSON text)`.
pub type Reply = (Option<String>, Vec<(String, String)>);

impl ToolFormat {
    pub fn detect(template: Option<&ChatTemplate>) -> ToolFormat {
        match template {
            Some(t) if t.reads_tools() && t.source().contains(HERMES_OPEN) => ToolFormat::Hermes,
            Some(t) if t.reads_tools() && t.source().contains("\"parameters\": ") => {
                ToolFormat::Llama3
            }
            _ => ToolFormat::Generic,
        }
    }

    /// Whether the template is given the tools and the assistant's past calls as data.
    pub fn is_native(self) -> bool {
        self != ToolFormat::Generic
    }

    /// The JSON object of one call to one of `offered` (name, then arguments), in the key
    /// names this format uses.
    fn call_schema(self, offered: &[(&str, Value)]) -> Value {
        let args_key = match self {
            ToolFormat::Llama3 => "parameters",
            _ => "arguments",
        };
        let alts: Vec<Value> = offered
            .iter()
            .map(|(name, params)| {
                json!({
                    "type": "object",
                    "properties": {"name": {"const": name}, args_key: params},
                    "required": ["name", args_key],
                    "additionalProperties": false,
                })
            })
            .collect();
        match alts.len() {
            1 => alts.into_iter().next().expect("one alternative"),
            _ => json!({"anyOf": alts}),
        }
    }

    /// The grammar of a reply that must call one of `offered` (`tool_choice` `required` or a
    /// named function): `parallel` allows several calls where the format has room for them.
    pub fn calls_grammar(self, offered: &[(&str, Value)], parallel: bool) -> Grammar {
        let schema = compact_schema(self.call_schema(offered));
        match self {
            ToolFormat::Hermes => {
                let more = if parallel { r#" ("\n" call)*"# } else { "" };
                Grammar::Lark(format!(
                    "start: call{more}\ncall: {open} body {close}\nbody: %json {schema}\n",
                    open = kiln_engine::lark_string(&format!("{HERMES_OPEN}\n")),
                    close = kiln_engine::lark_string(&format!("\n{HERMES_CLOSE}")),
                ))
            }
            _ => Grammar::JsonSchema(self.call_schema(offered)),
        }
    }

    /// Splits a finished reply into text and calls. Text that is not a well-formed call is
    /// returned whole as content, as a model that chose not to call a tool wrote it.
    pub fn parse(self, text: &str) -> Reply {
        let whole = || (Some(text.to_string()), Vec::new());
        let call = |v: &Value, args_keys: &[&str]| -> Option<(String, String)> {
            let name = v.get("name")?.as_str()?.to_string();
            let args = args_keys.iter().find_map(|k| v.get(*k))?;
            args.is_object().then(|| (name, compact_json(args)))
        };
        match self {
            ToolFormat::Hermes => {
                let Some(start) = text.find(HERMES_OPEN) else {
                    return whole();
                };
                let mut calls = Vec::new();
                for block in text[start..].split(HERMES_OPEN).skip(1) {
                    let Some((body, rest)) = block.split_once(HERMES_CLOSE) else {
                        return whole();
                    };
                    let parsed = serde_json::from_str::<Value>(body.trim()).ok();
                    match parsed.as_ref().and_then(|v| call(v, &["arguments"])) {
                        Some(c) if rest.trim().is_empty() => calls.push(c),
                        _ => return whole(),
                    }
                }
                let before = text[..start].trim();
                ((!before.is_empty()).then(|| before.to_string()), calls)
            }
            ToolFormat::Llama3 => {
                let body = text.trim().trim_start_matches("<|python_tag|>");
                match serde_json::from_str::<Value>(body)
                    .ok()
                    .and_then(|v| call(&v, &["parameters", "arguments"]))
                {
                    Some(c) => (None, vec![c]),
                    None => whole(),
                }
            }
            ToolFormat::Generic => whole(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_replies_split_into_text_and_calls() {
        let f = ToolFormat::Hermes;
        let text = "Let me look.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"put\", \"arguments\": {}}\n</tool_call>";
        let (content, calls) = f.parse(text);
        assert_eq!(content.as_deref(), Some("Let me look."));
        assert_eq!(
            calls,
            vec![
                ("get".into(), r#"{"a": 1}"#.into()),
                ("put".into(), "{}".into())
            ]
        );
        assert_eq!(
            f.parse("no calls here"),
            (Some("no calls here".into()), vec![])
        );
        // An unterminated or malformed block is text, not a call.
        let cut = "<tool_call>\n{\"name\": \"get\", \"argu";
        assert_eq!(f.parse(cut), (Some(cut.into()), vec![]));
        let bad = "<tool_call>\n{\"name\": \"get\"}\n</tool_call>";
        assert_eq!(f.parse(bad), (Some(bad.into()), vec![]));
    }

    #[test]
    fn llama3_replies_are_one_bare_call() {
        let f = ToolFormat::Llama3;
        let (content, calls) =
            f.parse(" {\"name\": \"get\", \"parameters\": {\"city\": \"Oslo\"}}");
        assert_eq!(content, None);
        assert_eq!(calls, vec![("get".into(), r#"{"city": "Oslo"}"#.into())]);
        assert_eq!(
            f.parse("Oslo is cold."),
            (Some("Oslo is cold.".into()), vec![])
        );
    }

    #[test]
    fn grammars_name_the_offered_tools() {
        let offered = [("get", json!({"type": "object"}))];
        let Grammar::Lark(g) = ToolFormat::Hermes.calls_grammar(&offered, true) else {
            panic!("Hermes calls are a Lark grammar");
        };
        assert!(g.starts_with("start: call (\"\\n\" call)*\ncall: \"<tool_call>\\n\" body"));
        assert!(g.contains(r#""const":"get""#), "{g}");
        let Grammar::JsonSchema(s) = ToolFormat::Llama3.calls_grammar(&offered, true) else {
            panic!("Llama 3 calls are a JSON schema");
        };
        assert_eq!(s["required"], json!(["name", "parameters"]));
    }
}
