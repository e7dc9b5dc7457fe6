//! GLM-4.5's call syntax (GLM-4.5, 4.6, 4.7 and their Air models): text, then for each call
//! `<tool_call>`, the function's name, each argument as `<arg_key>KEY</arg_key>` and
//! `<arg_value>VALUE</arg_value>` (newlines between them in 4.5 and 4.6, none in 4.7), and
//! `</tool_call>`. The templates write a string value as it is and any other value as JSON,
//! so a value is read back as JSON where it reads as a JSON value other than a string, and as
//! a string otherwise: a string argument whose text reads as a number, `true`, `false`,
//! `null`, an array or an object comes back as that value, unless the offered tools say which
//! parameters take strings ([`ParamKinds`]), as a request's do.

use std::collections::HashMap;

use kiln_core::{Grammar, compact_schema, lark_string, regex_escape};
use serde_json::{Map, Value};

use super::Reply;
use crate::tools::compact_json;

pub(super) const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
/// What the templates that write this syntax have and Hermes-style templates do not.
pub(super) const ARG_KEY: &str = "<arg_key>";
const ARG_KEY_CLOSE: &str = "</arg_key>";
const ARG_VALUE: &str = "<arg_value>";
const ARG_VALUE_CLOSE: &str = "</arg_value>";

/// Which of the offered tools' parameters take strings: (function, parameter) to whether its
/// schema's `type` is `"string"`, for the parameters whose schema names one type.
#[derive(Debug, Clone, Default)]
pub struct ParamKinds(HashMap<(String, String), bool>);

impl ParamKinds {
    /// From each offered function's name and parameters' schema.
    pub fn new(offered: &[(&str, Value)]) -> Self {
        let mut kinds = HashMap::new();
        for (name, params) in offered {
            let props = params.get("properties").and_then(Value::as_object);
            for (key, schema) in props.into_iter().flatten() {
                if let Some(t) = schema.get("type").and_then(Value::as_str) {
                    kinds.insert((name.to_string(), key.clone()), t == "string");
                }
            }
        }
        ParamKinds(kinds)
    }

    fn string(&self, function: &str, key: &str) -> Option<bool> {
        self.0
            .get(&(function.to_string(), key.to_string()))
            .copied()
    }
}

/// An argument's value as the template wrote it: a string parameter's text as it is, another
/// parameter's JSON (its text where it is not JSON), and for a parameter of no known type
/// JSON other than a string, or the text.
fn value(text: &str, string: Option<bool>) -> Value {
    let text_value = || Value::String(text.to_string());
    match (string, serde_json::from_str::<Value>(text)) {
        (Some(true), _) => text_value(),
        (Some(false), Ok(v)) => v,
        (None, Ok(v)) if !v.is_string() => v,
        _ => text_value(),
    }
}

/// How far one call, after its `<tool_call>`, reads.
enum Scan<'a> {
    /// Whole: the name, the arguments as JSON text, and the text after its `</tool_call>`.
    Call(String, String, &'a str),
    /// Cut short, with its name where that is whole (an argument or the closer begun after it).
    Open(Option<String>),
    /// Not a call.
    Bad,
}

/// Reads one call from `s` (after its `<tool_call>`): the name, then tags in order, so that
/// a value may hold any text but its own closer.
fn scan<'a>(s: &'a str, kinds: &ParamKinds) -> Scan<'a> {
    let Some(end) = s.find('<') else {
        return Scan::Open(None);
    };
    let name = s[..end].trim();
    if name.is_empty() {
        return Scan::Bad;
    }
    let mut args = Map::new();
    let mut rest = &s[end..];
    loop {
        if let Some(after) = rest.strip_prefix(CLOSE) {
            let args = compact_json(&Value::Object(args));
            return Scan::Call(name.to_string(), args, after);
        }
        let Some(after) = rest.strip_prefix(ARG_KEY) else {
            let begun = CLOSE.starts_with(rest) || ARG_KEY.starts_with(rest);
            return if begun {
                Scan::Open(Some(name.to_string()))
            } else {
                Scan::Bad
            };
        };
        let Some((key, after)) = after.split_once(ARG_KEY_CLOSE) else {
            return Scan::Open(Some(name.to_string()));
        };
        let after = after.trim_start();
        let Some(after) = after.strip_prefix(ARG_VALUE) else {
            return match ARG_VALUE.starts_with(after) {
                true => Scan::Open(Some(name.to_string())),
                false => Scan::Bad,
            };
        };
        let Some((text, after)) = after.split_once(ARG_VALUE_CLOSE) else {
            return Scan::Open(Some(name.to_string()));
        };
        let key = key.trim();
        args.insert(key.to_string(), value(text, kinds.string(name, key)));
        rest = after.trim_start();
    }
}

/// Splits a finished reply: the text before the first `<tool_call>`, then each call. A reply
/// that does not read as calls to its end is all text.
pub(super) fn parse(text: &str, kinds: &ParamKinds) -> Reply {
    let whole = || (Some(text.to_string()), Vec::new());
    let Some(start) = text.find(OPEN) else {
        return whole();
    };
    let mut calls = Vec::new();
    let mut rest = &text[start..];
    while let Some(block) = rest.strip_prefix(OPEN) {
        let Scan::Call(name, args, after) = scan(block, kinds) else {
            return whole();
        };
        calls.push((name, args));
        rest = after.trim_start();
    }
    if !rest.is_empty() {
        return whole();
    }
    let before = text[..start].trim();
    ((!before.is_empty()).then(|| before.to_string()), calls)
}

/// A reply's prefix as far as it goes: its content (trimmed, without what may still become
/// an opener) and its calls, each with its name once its first argument or its end is
/// written and its arguments (as JSON) once its `</tool_call>` is.
pub(crate) fn partial(text: &str, kinds: &ParamKinds) -> (String, Vec<(String, String)>) {
    let Some(start) = text.find(OPEN) else {
        let held = crate::partial_suffix(text, OPEN);
        return (text[..text.len() - held].trim().to_string(), Vec::new());
    };
    let mut calls = Vec::new();
    let mut rest = &text[start..];
    while let Some(block) = rest.strip_prefix(OPEN) {
        match scan(block, kinds) {
            Scan::Call(name, args, after) => {
                calls.push((name, args));
                rest = after.trim_start();
            }
            Scan::Open(Some(name)) => {
                calls.push((name, String::new()));
                break;
            }
            Scan::Open(None) | Scan::Bad => break,
        }
    }
    (text[..start].trim().to_string(), calls)
}

/// The grammar of a reply calling `offered`: each call one of their names and its arguments,
/// the required ones first in the schema's order, then any of the others in order; a string
/// parameter's value its text (one of its `enum`, or of its `minLength` to `maxLength`
/// characters without a `<`, or any text without the value's closer) and any other's JSON
/// that fits its schema. A function whose parameters name no properties takes any keys, each
/// value JSON or text. `auto`: text first, which calls may follow.
pub(super) fn grammar(offered: &[(&str, Value)], auto: bool, parallel: bool) -> Grammar {
    let nl = "\"\\n\"?";
    let mut rules = format!(
        "text_value[lazy]: /(?s:.*){}/\nANY_KEY: /[^<]+/\n",
        regex_escape(ARG_VALUE_CLOSE)
    );
    let (open_v, close_v) = (lark_string(ARG_VALUE), lark_string(ARG_VALUE_CLOSE));
    let (open_k, close_k) = (lark_string(ARG_KEY), lark_string(ARG_KEY_CLOSE));
    let mut names = Vec::new();
    for (i, (name, params)) in offered.iter().enumerate() {
        let props = params.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = (params.get("required").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let (mut first, mut then) = (Vec::new(), Vec::new());
        for (j, (key, schema)) in props.into_iter().flatten().enumerate() {
            let v = format!("v{i}_{j}");
            rules += &format!("{v}: {}\n", value_rule(schema, &close_v));
            rules += &format!(
                "a{i}_{j}: {open_k} {} {close_k} {nl} {open_v} {v} {nl}\n",
                lark_string(key)
            );
            match required.contains(&key.as_str()) {
                true => first.push(format!("a{i}_{j}")),
                false => then.push(format!("a{i}_{j}?")),
            }
        }
        if props.is_none() {
            rules +=
                &format!("a{i}_any: {open_k} ANY_KEY {close_k} {nl} {open_v} text_value {nl}\n");
            then.push(format!("a{i}_any*"));
        }
        let args: String = first.iter().chain(&then).map(|a| format!(" {a}")).collect();
        rules += &format!("fn{i}: {} {nl}{args}\n", lark_string(name));
        names.push(format!("fn{i}"));
    }
    let (open, close) = (lark_string(OPEN), lark_string(CLOSE));
    rules += &format!(
        "call: {open} function {close}\nfunction: {}\n",
        names.join(" | ")
    );
    let more = if parallel {
        format!(" ({nl} call)*")
    } else {
        String::new()
    };
    let start = match auto {
        false => format!("start: call{more}\n"),
        // Text up to the first opener (a lazy lexeme, which ends where the opener does), or
        // text without one.
        true => format!(
            "start: TEXT | lead function {close}{more}\n\
             TEXT: /(?s:.*)/ & ~/(?s:.*){o}(?s:.*)/\n\
             lead[lazy]: /(?s:.*){o}/\n",
            o = regex_escape(OPEN),
        ),
    };
    Grammar::Lark(format!("{start}{rules}"))
}

/// A value of `schema` and the value's closer (`close`, a Lark string), as a Lark rule body.
fn value_rule(schema: &Value, close: &str) -> String {
    if schema.get("type").and_then(Value::as_str) != Some("string") {
        return format!("%json {} {close}", compact_schema(schema.clone()));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let texts: Vec<String> = (options.iter().filter_map(Value::as_str))
            .map(lark_string)
            .collect();
        if !texts.is_empty() {
            return format!("({}) {close}", texts.join(" | "));
        }
    }
    let bound = |k: &str| schema.get(k).and_then(Value::as_u64);
    match (bound("minLength"), bound("maxLength")) {
        (None, None) => "text_value".to_string(),
        (min, max) => format!(
            "/[^<]{{{},{}}}/ {close}",
            min.unwrap_or(0),
            max.map_or(String::new(), |m| m.to_string())
        ),
    }
}
