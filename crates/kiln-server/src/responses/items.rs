//! A Responses conversation as chat messages. Items are what the API trades in both
//! directions (a reply's output items are valid input items), so a stored conversation, the
//! new input and a client's hand-kept history all turn into messages here:
//!
//! - `message` items keep their role (`developer` is the chat API's `system`), their text
//!   parts joined;
//! - a `reasoning` item goes, as `reasoning_content`, to the assistant turn that follows it;
//! - `function_call` items join the assistant turn they follow (a reply that wrote text and
//!   then called is one turn, as the model wrote it), and `function_call_output` items become
//!   `tool` messages answering their `call_id`.

use serde_json::{Value, json};

use crate::api::ChatMessageIn;
use crate::error::ApiError;

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_param("input", m)
}

/// `instructions` as a system message, then `items` as chat messages.
pub fn messages(
    instructions: Option<&str>,
    items: &[Value],
) -> Result<Vec<ChatMessageIn>, ApiError> {
    let mut out: Vec<ChatMessageIn> = instructions
        .map(|i| ChatMessageIn::text("system", Some(i.to_string())))
        .into_iter()
        .collect();
    // Reasoning waiting for its assistant turn, and whether the last message is an
    // assistant turn that later calls may join.
    let (mut reasoning, mut turn_open) = (None::<String>, false);
    for item in items {
        let kind = item_type(item)?;
        if kind != "reasoning"
            && kind != "function_call"
            && !(kind == "message" && item["role"] == "assistant")
            && let Some(r) = reasoning.take()
        {
            // A turn that only reasoned (cut by the token limit, say).
            let mut m = ChatMessageIn::text("assistant", Some(String::new()));
            m.reasoning_content = Some(r);
            out.push(m);
        }
        match kind {
            "message" => {
                let role = match item["role"].as_str() {
                    Some("developer") => "system",
                    Some(r @ ("user" | "system" | "assistant")) => r,
                    other => {
                        return Err(bad(format!(
                            "a message item's role must be user, system, developer or assistant, not {}",
                            other.map_or("missing".into(), |r| format!("`{r}`"))
                        )));
                    }
                };
                let mut m = ChatMessageIn::text(role, Some(text(&item["content"], "message")?));
                if role == "assistant" {
                    m.reasoning_content = reasoning.take();
                }
                turn_open = role == "assistant";
                out.push(m);
            }
            "reasoning" => {
                let r = reasoning_text(item)?;
                reasoning = Some(match reasoning.take() {
                    Some(before) => format!("{before}\n{r}"),
                    None => r,
                });
                turn_open = false;
            }
            "function_call" => {
                let field = |k: &str| {
                    item[k]
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("a function_call item needs a string `{k}`")))
                };
                let call = json!({"id": field("call_id")?, "type": "function",
                    "function": {"name": field("name")?, "arguments": field("arguments")?}});
                let joins = turn_open && reasoning.is_none();
                match out.last_mut() {
                    Some(last) if joins => last.tool_calls.get_or_insert_with(Vec::new).push(call),
                    _ => {
                        let mut m = ChatMessageIn::text("assistant", None);
                        m.reasoning_content = reasoning.take();
                        m.tool_calls = Some(vec![call]);
                        out.push(m);
                    }
                }
                turn_open = true;
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().ok_or_else(|| {
                    bad("a function_call_output item needs the string `call_id` it answers")
                })?;
                let output = match &item["output"] {
                    Value::String(s) => s.clone(),
                    v @ Value::Array(_) => text(v, "function_call_output")?,
                    _ => return Err(bad("a function_call_output item needs its `output`")),
                };
                let mut m = ChatMessageIn::text("tool", Some(output));
                m.tool_call_id = Some(id.to_string());
                turn_open = false;
                out.push(m);
            }
            other => {
                return Err(bad(format!(
                    "input items of type `{other}` are not supported (message, reasoning, function_call, function_call_output)"
                )));
            }
        }
    }
    if let Some(r) = reasoning {
        let mut m = ChatMessageIn::text("assistant", Some(String::new()));
        m.reasoning_content = Some(r);
        out.push(m);
    }
    Ok(out)
}

/// `item` as a stored response keeps and lists it: its `type` written out, an `id` where it
/// has none, and a message's text content as a part.
pub fn stored(mut item: Value) -> Value {
    let kind = item_type(&item).unwrap_or("item").to_string();
    if item.get("type").is_none() {
        item["type"] = json!(kind);
    }
    if let Some(text) = item
        .get("content")
        .and_then(Value::as_str)
        .filter(|_| kind == "message")
    {
        let part = if item["role"] == "assistant" {
            "output_text"
        } else {
            "input_text"
        };
        item["content"] = json!([{"type": part, "text": text}]);
    }
    if item.get("id").is_none_or(Value::is_null) {
        let prefix = match kind.as_str() {
            "message" => "msg",
            "function_call" => "fc",
            "function_call_output" => "fco",
            "reasoning" => "rs",
            _ => "item",
        };
        item["id"] = json!(super::random_id(prefix));
    }
    item
}

/// An item's `type`; a bare `{"role", "content"}` is a message.
fn item_type(item: &Value) -> Result<&str, ApiError> {
    match (item.get("type"), item.get("role")) {
        (Some(Value::String(t)), _) => Ok(t),
        (None, Some(_)) => Ok("message"),
        _ => Err(bad(
            "each input item needs a `type` (or a `role`, for a message)",
        )),
    }
}

/// A content field's text: a string, or its text parts joined.
fn text(content: &Value, what: &str) -> Result<String, ApiError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut s = String::new();
            for p in parts {
                match (p["type"].as_str(), p["text"].as_str()) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => s.push_str(t),
                    (kind, _) => {
                        return Err(bad(format!(
                            "{what} content parts of type `{}` are not supported (input_text, output_text)",
                            kind.unwrap_or("?")
                        )));
                    }
                }
            }
            Ok(s)
        }
        _ => Err(bad(format!("a {what} item needs its `content`"))),
    }
}

/// A reasoning item's text: its `reasoning_text` parts, or else its summary's parts.
fn reasoning_text(item: &Value) -> Result<String, ApiError> {
    let parts = |key: &str, kind: &str| -> Result<Option<String>, ApiError> {
        let Some(list) = item
            .get(key)
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty())
        else {
            return Ok(None);
        };
        let texts = list
            .iter()
            .map(|p| match (p["type"].as_str(), p["text"].as_str()) {
                (Some(k), Some(t)) if k == kind => Ok(t),
                _ => Err(bad(format!(
                    "a reasoning item's {key} holds `{kind}` parts"
                ))),
            });
        Ok(Some(texts.collect::<Result<Vec<_>, _>>()?.join("\n")))
    };
    if item.get("encrypted_content").is_some_and(|v| !v.is_null()) {
        return Err(bad(
            "reasoning items with encrypted_content are not supported",
        ));
    }
    Ok(parts("content", "reasoning_text")?
        .or(parts("summary", "summary_text")?)
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MessageContent;

    fn roles(ms: &[ChatMessageIn]) -> Vec<String> {
        ms.iter()
            .map(|m| {
                let calls = m.tool_calls.as_ref().map_or(0, Vec::len);
                let r = if m.reasoning_content.is_some() {
                    "+r"
                } else {
                    ""
                };
                format!(
                    "{}{r}{}",
                    m.role,
                    if calls > 0 {
                        format!("+{calls}c")
                    } else {
                        String::new()
                    }
                )
            })
            .collect()
    }

    #[test]
    fn a_reply_that_reasons_writes_and_calls_is_one_turn() {
        let items = json!([
            {"role": "developer", "content": "Be brief."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "in Oslo?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Use the tool."}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "call_id": "call_a", "name": "get", "arguments": "{\"city\": \"Oslo\"}"},
            {"type": "function_call", "call_id": "call_b", "name": "get", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_a", "output": "rain"},
            {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "sun"}]},
        ]);
        let ms = messages(Some("You are kiln."), items.as_array().unwrap()).unwrap();
        assert_eq!(
            roles(&ms),
            ["system", "system", "user", "assistant+r+2c", "tool", "tool"]
        );
        assert!(matches!(&ms[2].content, Some(MessageContent::Text(t)) if t == "Weather in Oslo?"));
        assert_eq!(ms[3].reasoning_content.as_deref(), Some("Use the tool."));
        assert!(matches!(&ms[5].content, Some(MessageContent::Text(t)) if t == "sun"));
        assert_eq!(ms[4].tool_call_id.as_deref(), Some("call_a"));
    }

    #[test]
    fn calls_after_reasoning_or_a_tool_answer_open_a_new_turn() {
        let items = json!([
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "1"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "again"}]},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "cut off"}]},
            {"role": "user", "content": "go on"},
        ]);
        let ms = messages(None, items.as_array().unwrap()).unwrap();
        assert_eq!(
            roles(&ms),
            [
                "assistant+1c",
                "tool",
                "assistant+r+1c",
                "assistant+r",
                "user"
            ]
        );
        assert_eq!(ms[2].reasoning_content.as_deref(), Some("again"));
    }

    #[test]
    fn unsupported_items_are_named() {
        for (item, says) in [
            (
                json!({"type": "item_reference", "id": "x"}),
                "`item_reference`",
            ),
            (
                json!({"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}),
                "`input_image`",
            ),
            (json!({"role": "critic", "content": "x"}), "`critic`"),
            (
                json!({"type": "function_call", "name": "f", "arguments": "{}"}),
                "`call_id`",
            ),
            (
                json!({"type": "reasoning", "encrypted_content": "zzz"}),
                "encrypted_content",
            ),
            (json!({"content": "no role"}), "`type`"),
        ] {
            let e = messages(None, &[item]).unwrap_err();
            assert!(e.message.contains(says), "{}", e.message);
            assert_eq!(e.param.as_deref(), Some("input"));
        }
    }
}
