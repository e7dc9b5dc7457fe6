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

/// `s` as a Lark `/regex/` body matching it literally (only the metacharacters escaped: `\<`
/// would be a word boundary).
fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '/' => format!("\\{c}"),
            c => c.to_string(),
        })
        .collect()
}

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

    /// The grammar of a reply that calls `offered`: only calls (`tool_choice` `required` or a
    /// named function), or, when `auto`, free text where a call, once opened, must be
    /// well-formed. `parallel` allows several calls where the format has room for them.
    pub fn calls_grammar(self, offered: &[(&str, Value)], auto: bool, parallel: bool) -> Grammar {
        let schema = compact_schema(self.call_schema(offered));
        match self {
            ToolFormat::Hermes => {
                let open = kiln_engine::lark_string(&format!("{HERMES_OPEN}\n"));
                let close = kiln_engine::lark_string(&format!("\n{HERMES_CLOSE}"));
                let more = if parallel { r#" ("\n" call)*"# } else { "" };
                let start = if auto {
                    // Text without the opener, or text up to the first opener (a lazy lexeme,
                    // which ends where the opener does), then the calls.
                    format!(
                        "start: TEXT | lead \"\\n\" body {close}{more}\n\
                         TEXT: /(?s:.*)/ & ~/(?s:.*){o}(?s:.*)/\n\
                         lead[lazy]: /(?s:.*){o}/\n",
                        o = regex_escape(HERMES_OPEN),
                    )
                } else {
                    format!("start: call{more}\n")
                };
                Grammar::Lark(format!(
                    "{start}call: {open} body {close}\nbody: %json {schema}\n"
                ))
            }
            // A reply that opens with `{` is the call; any other text is an answer.
            ToolFormat::Llama3 if auto => Grammar::Lark(format!(
                "start: TEXT | call\nTEXT: /([^{{](?s:.*))?/\ncall: %json {schema}\n"
            )),
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
        let Grammar::Lark(g) = ToolFormat::Hermes.calls_grammar(&offered, false, true) else {
            panic!("Hermes calls are a Lark grammar");
        };
        assert!(g.starts_with("start: call (\"\\n\" call)*\ncall: \"<tool_call>\\n\" body"));
        assert!(g.contains(r#""const":"get""#), "{g}");
        let Grammar::JsonSchema(s) = ToolFormat::Llama3.calls_grammar(&offered, false, true) else {
            panic!("Llama 3 calls are a JSON schema");
        };
        assert_eq!(s["required"], json!(["name", "parameters"]));
    }

    /// Whether `grammar` lets the tiny tokenizer's tokens of `text` through, then EOS.
    fn accepts(grammar: &Grammar, text: &str) -> bool {
        use kiln_model::testing::tiny_tokenizer;
        let json = serde_json::to_vec(&tiny_tokenizer::tokenizer_json()).unwrap();
        let tok = kiln_model::Tokenizer::from_json_bytes(&json, "tiny").unwrap();
        let eos = tiny_tokenizer::eos_id();
        let factory = kiln_engine::ConstraintFactory::new(&tok, &[eos], tok.vocab_size()).unwrap();
        let mut c = factory.compile(grammar).unwrap();
        let allowed = |c: &mut kiln_engine::Constraint, t: u32| {
            c.mask().unwrap()[t as usize / 32] & (1 << (t % 32)) != 0
        };
        for t in tok.encode(text, false).unwrap() {
            if !allowed(&mut c, t) {
                return false;
            }
            c.consume(t).unwrap();
        }
        allowed(&mut c, eos)
    }

    #[test]
    fn auto_lets_text_through_but_holds_an_opened_call_to_the_schema() {
        let offered = [(
            "get",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
        )];
        let call =
            "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
        let hermes = ToolFormat::Hermes.calls_grammar(&offered, true, true);
        assert!(accepts(&hermes, "It is cold in Oslo.\nBring a coat."));
        assert!(accepts(&hermes, ""));
        assert!(accepts(&hermes, call));
        assert!(accepts(&hermes, &format!("Let me look.\n{call}\n{call}")));
        // Once opened, a call must be one of the offered tools with valid arguments.
        assert!(!accepts(&hermes, "<tool_call>\n{\"name\": \"put\""));
        assert!(!accepts(
            &hermes,
            "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}"
        ));
        assert!(!accepts(&hermes, "Hm <tool_call> oops"));
        // Without parallel calls, one call ends the reply.
        let single = ToolFormat::Hermes.calls_grammar(&offered, true, false);
        assert!(accepts(&single, call));
        assert!(!accepts(&single, &format!("{call}\n<")));
        // Required: no text at all.
        let required = ToolFormat::Hermes.calls_grammar(&offered, false, true);
        assert!(accepts(&required, call));
        assert!(!accepts(&required, "It is"));

        let llama = ToolFormat::Llama3.calls_grammar(&offered, true, true);
        assert!(accepts(&llama, "Oslo is cold."));
        assert!(accepts(
            &llama,
            r#"{"name": "get", "parameters": {"city": "Oslo"}}"#
        ));
        assert!(!accepts(&llama, r#"{"name": "get", "parameters": {"town""#));
    }
}
