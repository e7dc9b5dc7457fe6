//! Streaming a reply under tools token by token: each time a choice's text grows, its prefix
//! is parsed as far as it goes ([`partial`]) and what is new since the last delta is sent:
//! content text, a call's header (index, id, type, name) once its name is complete, then its
//! arguments as they are written. Text that might still become a call opener is held back.

use serde_json::{Value, json};

use super::ToolPlan;
use super::format::{MISTRAL_ARGS, MISTRAL_OPEN, ParamKinds, ToolFormat};

/// A reply's prefix, parsed: its content so far and its calls so far (a call's name once
/// complete, its arguments' raw JSON text so far).
#[derive(Debug, Default, PartialEq)]
pub struct Partial {
    pub content: String,
    pub calls: Vec<(String, String)>,
}

/// Parses the prefix `text` of a reply in `format` (`generic`: kiln's JSON reply object).
pub fn partial(format: ToolFormat, text: &str) -> Partial {
    partial_typed(format, text, &ParamKinds::default())
}

/// The same, with the offered tools' string parameters known.
pub fn partial_typed(format: ToolFormat, text: &str, kinds: &ParamKinds) -> Partial {
    let mut p = Partial::default();
    match format {
        ToolFormat::Generic => {
            if let Some(rest) = text.strip_prefix(r#"{"response": ""#) {
                p.content = json_string_prefix(rest).0;
            } else if let Some(mut rest) = text.strip_prefix(r#"{"tool_calls": ["#) {
                while let Some(after) = call(&mut p, rest, "arguments") {
                    match after.strip_prefix(", ") {
                        Some(next) => rest = next,
                        None => break,
                    }
                }
            }
        }
        ToolFormat::Hermes => {
            const OPEN: &str = "<tool_call>";
            // Content is trimmed (as the finished reply's is), so it only ever grows.
            let Some(start) = text.find(OPEN) else {
                p.content = held_back(text, OPEN).trim().to_string();
                return p;
            };
            p.content = text[..start].trim().to_string();
            for block in text[start..].split(OPEN).skip(1) {
                if call(&mut p, block.trim_start(), "arguments").is_none() {
                    break;
                }
            }
        }
        ToolFormat::Mistral { .. } => {
            // Calls open the reply: the opener (as text, where it is not a special token)
            // and a JSON array of calls. Text that may still become that is held back.
            let start = text.trim_start();
            let body = match start.strip_prefix(MISTRAL_OPEN) {
                Some(rest) => rest.trim_start(),
                None if MISTRAL_OPEN.starts_with(start) => return p,
                None => start,
            };
            match body.strip_prefix('[') {
                Some(mut rest) if may_open_call(rest) => {
                    while let Some(after) = call(&mut p, rest, "arguments") {
                        match lit(after, ",") {
                            Some(next) => rest = next,
                            None => break,
                        }
                    }
                }
                None if body.is_empty() => {}
                _ => p.content = text.to_string(),
            }
        }
        ToolFormat::MistralArgs { .. } => {
            // Text, then `[TOOL_CALLS]name[ARGS]{..}` per call (the markers kept in the text).
            let Some(start) = text.find(MISTRAL_OPEN) else {
                p.content = held_back(text, MISTRAL_OPEN).trim().to_string();
                return p;
            };
            p.content = text[..start].trim().to_string();
            let mut rest = &text[start..];
            while let Some(call) = rest.strip_prefix(MISTRAL_OPEN) {
                let Some((name, args)) = call.split_once(MISTRAL_ARGS) else {
                    break;
                };
                let args = args.trim_start();
                let end = json_value_end(args);
                let written = &args[..end.unwrap_or(args.len())];
                p.calls.push((name.trim().to_string(), written.to_string()));
                let Some(end) = end else { break };
                rest = args[end..].trim_start();
            }
        }
        ToolFormat::Pythonic => {
            // A call's arguments go out whole, as JSON, once its `)` is written.
            (p.content, p.calls) = super::format::pythonic::partial(text);
        }
        ToolFormat::Glm => {
            // A call's arguments go out whole, as JSON, once its `</tool_call>` is written.
            (p.content, p.calls) = super::format::glm::partial(text, kinds);
        }
        ToolFormat::Harmony => {
            // A call's arguments go out as they are written, once its header is whole.
            (p.content, p.calls) = super::format::harmony::partial(text);
        }
        ToolFormat::Llama3 => {
            let body = text.trim_start().trim_start_matches("<|python_tag|>");
            if body.starts_with('{') {
                call(&mut p, body, "parameters");
            } else if !body.is_empty() && !"<|python_tag|>".starts_with(body) {
                p.content = text.to_string();
            }
        }
    }
    p
}

/// Parses `{"name": "N", "<args_key>": ARGS}` from the start of `s` into `p.calls` as far as
/// it goes; returns the text after the closing brace once the call is complete.
fn call<'a>(p: &mut Partial, s: &'a str, args_key: &str) -> Option<&'a str> {
    let s = lit(s, "{")?;
    let s = lit(s, "\"name\"")?;
    let s = lit(s, ":")?;
    let s = lit(s, "\"")?;
    let (name, closed) = json_string_prefix(s);
    let s = &s[closed?..];
    let s = lit(s, ",")?;
    let s = lit(s, &format!("\"{args_key}\""))?;
    let s = lit(s, ":")?.trim_start();
    let end = json_value_end(s);
    p.calls
        .push((name, s[..end.unwrap_or(s.len())].to_string()));
    lit(&s[end?..], "}")
}

/// Whether `s` is, or may still become, the start of a call object (`{"name"`).
fn may_open_call(s: &str) -> bool {
    match lit(s, "{") {
        Some(rest) => {
            let rest = rest.trim_start();
            "\"name\"".starts_with(rest) || rest.starts_with("\"name\"")
        }
        None => s.trim_start().is_empty(),
    }
}

/// `s` after optional whitespace and `l`; `None` when `s` does not (yet) hold all of `l`.
fn lit<'a>(s: &'a str, l: &str) -> Option<&'a str> {
    s.trim_start().strip_prefix(l)
}

/// Decodes the JSON string body at the start of `s` (after its opening quote) as far as it
/// is complete: the text, and the byte offset after the closing quote once there is one.
fn json_string_prefix(s: &str) -> (String, Option<usize>) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, Some(i + 1)),
            '\\' => {
                // Decode one escape when it is whole (a surrogate pair as one); stop before a
                // cut one.
                let rest = &s[i..];
                let lens: &[usize] = if rest[1..].starts_with('u') {
                    &[6, 12]
                } else {
                    &[2]
                };
                let decoded = lens.iter().find_map(|&len| {
                    let esc = rest.get(..len)?;
                    let d = serde_json::from_str::<String>(&format!("\"{esc}\"")).ok()?;
                    Some((d, len))
                });
                let Some((d, len)) = decoded else {
                    return (out, None);
                };
                out.push_str(&d);
                for _ in 1..len {
                    chars.next();
                }
            }
            c => out.push(c),
        }
    }
    (out, None)
}

/// The byte length of the JSON value at the start of `s` once it is complete.
fn json_value_end(s: &str) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, c) in s.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` without a tail that could be the start of `opener`.
fn held_back<'a>(text: &'a str, opener: &str) -> &'a str {
    &text[..text.len() - crate::partial_suffix(text, opener)]
}

/// One streamed choice: its text so far and what of it has been sent.
pub struct ToolStream {
    format: ToolFormat,
    kinds: ParamKinds,
    text: String,
    content_sent: usize,
    /// Per call sent: its id and how many bytes of its arguments went out.
    calls_sent: Vec<(String, usize)>,
}

impl ToolStream {
    pub fn new(format: ToolFormat) -> Self {
        ToolStream {
            format,
            kinds: ParamKinds::default(),
            text: String::new(),
            content_sent: 0,
            calls_sent: Vec::new(),
        }
    }

    /// A stream in `plan`'s format, its offered tools' string parameters known.
    pub fn for_plan(plan: &ToolPlan) -> Self {
        ToolStream {
            kinds: plan.param_kinds(),
            ..Self::new(plan.format)
        }
    }

    /// Takes the choice's next text; returns the deltas to send (each a chat `delta` object).
    pub fn push(&mut self, text: &str, new_id: impl FnMut() -> String) -> Vec<Value> {
        let pieces = self.pieces(text, new_id);
        pieces.into_iter().map(|p| match p {
            Piece::Content(t) => json!({"content": t}),
            Piece::Call { index, id, name } => json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Piece::Args { index, text } => json!({"tool_calls": [{"index": index, "function": {"arguments": text}}]}),
        }).collect()
    }

    /// Takes the choice's next text; returns what it adds to the reply, in order.
    pub fn pieces(&mut self, text: &str, new_id: impl FnMut() -> String) -> Vec<Piece> {
        self.text.push_str(text);
        self.new_pieces(partial_typed(self.format, &self.text, &self.kinds), new_id)
    }

    /// The text taken so far, where none of it has gone out as content or calls (a reply
    /// cut before it reads as either).
    pub fn unsent(&self) -> Option<&str> {
        (self.content_sent == 0 && self.calls_sent.is_empty()).then_some(self.text.as_str())
    }

    /// Whether any call has gone out (the finish reason is then the calls').
    pub fn called(&self) -> bool {
        !self.calls_sent.is_empty()
    }

    fn new_pieces(&mut self, p: Partial, mut new_id: impl FnMut() -> String) -> Vec<Piece> {
        let mut out = Vec::new();
        if p.content.len() > self.content_sent && p.content.is_char_boundary(self.content_sent) {
            out.push(Piece::Content(p.content[self.content_sent..].to_string()));
            self.content_sent = p.content.len();
        }
        for (index, (name, args)) in p.calls.into_iter().enumerate() {
            if index == self.calls_sent.len() {
                let id = new_id();
                out.push(Piece::Call {
                    index,
                    id: id.clone(),
                    name,
                });
                self.calls_sent.push((id, 0));
            }
            let sent = &mut self.calls_sent[index].1;
            if args.len() > *sent && args.is_char_boundary(*sent) {
                out.push(Piece::Args {
                    index,
                    text: args[*sent..].to_string(),
                });
                *sent = args.len();
            }
        }
        out
    }
}

/// What a reply's growing text adds: answer text, a call opened (once its name is whole),
/// or more of a call's arguments (raw JSON text).
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Content(String),
    Call {
        index: usize,
        id: String,
        name: String,
    },
    Args {
        index: usize,
        text: String,
    },
}

#[cfg(test)]
mod tests;
