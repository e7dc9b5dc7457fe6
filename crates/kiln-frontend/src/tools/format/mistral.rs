//! Mistral's two call syntaxes. The first (Mistral 7B v0.3, Nemo): `[TOOL_CALLS]` opening the
//! reply, then one JSON array of `{"name": .., "arguments": {..}}` objects. The later one
//! (Mistral Small 3.1 on, Devstral, Magistral, Ministral 3): text, then for each call
//! `[TOOL_CALLS]`, the function's name, `[ARGS]` and its arguments as a JSON object.

use kiln_core::{Grammar, compact_schema, lark_string, regex_escape};
use serde_json::{Value, json};

use super::{MISTRAL_ARGS, MISTRAL_OPEN, Reply};
use crate::tools::compact_json;

/// A marker in a Lark grammar: its token where the tokenizer has it as a special token (its
/// text written in ordinary tokens then does not count), its text otherwise.
fn marker(special: Option<u32>, text: &str) -> String {
    match special {
        Some(id) => format!("<[{id}]>"),
        None => lark_string(text),
    }
}

/// The first syntax: an opener, then an array of `call` objects (one at most unless
/// `parallel`). `auto`: an answer may be any text but what would read as calls.
pub(super) fn array_grammar(open: Option<u32>, call: Value, auto: bool, parallel: bool) -> Grammar {
    let mut calls = json!({"type": "array", "items": call, "minItems": 1});
    if !parallel {
        calls["maxItems"] = json!(1);
    }
    let calls = compact_schema(calls);
    // An answer may not be the opener written out, nor a JSON array of objects (a special
    // opener leaves no text of its own, so the calls are known by what follows it).
    let start = if auto {
        format!(
            "start: TEXT | call\nTEXT: /(?s:.*)/ & ~/{o}(?s:.*)/ & ~/\\s*\\[\\s*\\{{(?s:.*)/\n",
            o = regex_escape(MISTRAL_OPEN),
        )
    } else {
        "start: call\n".to_string()
    };
    let opener = marker(open, MISTRAL_OPEN);
    Grammar::Lark(format!(
        "{start}call: {opener} \" \"? body\nbody: %json {calls}\n"
    ))
}

/// The later syntax: a call is the opener, one of `offered`'s names, `[ARGS]` and arguments
/// that fit its parameters. `auto`: text first, which calls may follow.
pub(super) fn named_grammar(
    open: Option<u32>,
    args: Option<u32>,
    offered: &[(&str, Value)],
    auto: bool,
    parallel: bool,
) -> Grammar {
    let args_marker = marker(args, MISTRAL_ARGS);
    let mut rules = String::new();
    let mut names = Vec::new();
    for (i, (name, params)) in offered.iter().enumerate() {
        let schema = compact_schema(params.clone());
        let name = lark_string(name);
        rules += &format!("fn{i}: {name} {args_marker} args{i}\nargs{i}: %json {schema}\n");
        names.push(format!("fn{i}"));
    }
    let opener = marker(open, MISTRAL_OPEN);
    rules += &format!("call: {opener} function\nfunction: {}\n", names.join(" | "));
    let more = if parallel { " call*" } else { "" };
    let start = match (auto, open) {
        (false, _) => format!("start: call{more}\n"),
        // A special opener is never text, so text ends where it comes.
        (true, Some(_)) => format!("start: TEXT? (call{more})?\nTEXT: /(?s:.+)/\n"),
        // Text up to the first opener (a lazy lexeme, which ends where the opener does), or
        // text without one.
        (true, None) => format!(
            "start: TEXT | lead function{more}\n\
             TEXT: /(?s:.*)/ & ~/(?s:.*){o}(?s:.*)/\n\
             lead[lazy]: /(?s:.*){o}/\n",
            o = regex_escape(MISTRAL_OPEN),
        ),
    };
    Grammar::Lark(format!("{start}{rules}"))
}

/// Splits a reply in the first syntax; `call` reads one call object.
pub(super) fn parse_array(text: &str, call: impl Fn(&Value) -> Option<(String, String)>) -> Reply {
    let whole = || (Some(text.to_string()), Vec::new());
    let body = text.trim();
    let body = body.strip_prefix(MISTRAL_OPEN).unwrap_or(body).trim_start();
    if !body.starts_with('[') {
        return whole();
    }
    let calls: Option<Vec<_>> = match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(items)) if !items.is_empty() => items.iter().map(call).collect(),
        _ => None,
    };
    match calls {
        Some(calls) => (None, calls),
        None => whole(),
    }
}

/// Splits a reply in the later syntax (its markers in its text): the text before the first
/// opener, then each call. A reply that does not read as calls to the end is all text.
pub(super) fn parse_named(text: &str) -> Reply {
    let whole = || (Some(text.to_string()), Vec::new());
    let Some(start) = text.find(MISTRAL_OPEN) else {
        return whole();
    };
    let mut calls = Vec::new();
    let mut rest = &text[start..];
    while let Some(call) = rest.strip_prefix(MISTRAL_OPEN) {
        let Some((name, args)) = call.split_once(MISTRAL_ARGS) else {
            return whole();
        };
        // The arguments are one JSON object; the next call (or the end) follows it.
        let mut values = serde_json::Deserializer::from_str(args).into_iter::<Value>();
        let (name, value) = (name.trim(), values.next());
        match value {
            Some(Ok(v)) if v.is_object() && !name.is_empty() => {
                calls.push((name.to_string(), compact_json(&v)));
            }
            _ => return whole(),
        }
        rest = args[values.byte_offset()..].trim_start();
    }
    if !rest.is_empty() {
        return whole();
    }
    let before = text[..start].trim();
    ((!before.is_empty()).then(|| before.to_string()), calls)
}
