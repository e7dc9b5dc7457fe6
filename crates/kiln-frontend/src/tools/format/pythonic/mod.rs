//! Calls written as a Python list of function calls with keyword arguments, the whole reply:
//! `[get_weather(city="Oslo", days=3), get_time()]` (Llama 3.2's and Llama 4's templates that
//! describe this syntax, and vLLM's `pythonic` parser). Argument values are Python literals:
//! strings in either quote, numbers, `True`, `False`, `None`, lists and dicts, turned into
//! JSON for the reply's `arguments`. Llama 4 wraps the list in `<|python_start|>` and
//! `<|python_end|>`, which are taken off.

mod grammar;
mod literal;

use serde_json::Value;

use self::literal::Cursor;
use super::Reply;
use crate::tools::compact_json;

pub(super) use self::grammar::grammar;
#[cfg(test)]
pub(crate) use self::grammar::int_regex;

/// Llama 4's markers around a call list.
const PYTHON_START: &str = "<|python_start|>";
const PYTHON_END: &str = "<|python_end|>";

/// A reply's text with Llama 4's markers taken off, trimmed.
fn body(text: &str) -> &str {
    let t = text.trim();
    let t = t.strip_prefix(PYTHON_START).unwrap_or(t);
    t.strip_suffix(PYTHON_END).unwrap_or(t).trim()
}

/// Splits a finished reply: a whole call list is calls, anything else is text.
pub(super) fn parse(text: &str) -> Reply {
    match calls_of(body(text)) {
        Some(calls) if !calls.is_empty() => (None, calls),
        _ => (Some(text.to_string()), Vec::new()),
    }
}

/// The calls of `s` when it is a whole call list.
fn calls_of(s: &str) -> Option<Vec<(String, String)>> {
    let mut c = Cursor::new(s);
    if !c.eat('[') {
        return None;
    }
    let mut calls = Vec::new();
    loop {
        c.ws();
        if c.eat(']') {
            break;
        }
        if !calls.is_empty() {
            if !c.eat(',') {
                return None;
            }
            c.ws();
        }
        let name = c.name()?;
        c.ws();
        if !c.eat('(') {
            return None;
        }
        calls.push((name, compact_json(&Value::Object(c.args()?))));
    }
    c.ws();
    c.rest().is_empty().then_some(calls)
}

/// A reply's prefix as far as it goes: its content (the whole text once it cannot open a call
/// list) and its calls, each with its name once its `(` is written and its arguments (as
/// JSON) once its `)` is.
pub(crate) fn partial(text: &str) -> (String, Vec<(String, String)>) {
    let start = text.trim_start();
    if start.len() < PYTHON_START.len() && PYTHON_START.starts_with(start) {
        return (String::new(), Vec::new());
    }
    let mut c = Cursor::new(
        start
            .strip_prefix(PYTHON_START)
            .unwrap_or(start)
            .trim_start(),
    );
    if c.rest().is_empty() {
        return (String::new(), Vec::new());
    }
    if !c.eat('[') {
        return (text.to_string(), Vec::new());
    }
    let mut calls = Vec::new();
    loop {
        c.ws();
        if !calls.is_empty() {
            if !c.eat(',') {
                break;
            }
            c.ws();
        }
        let Some(name) = c.name() else { break };
        c.ws();
        if !c.eat('(') {
            break;
        }
        match c.args() {
            Some(args) => calls.push((name, compact_json(&Value::Object(args)))),
            None => {
                calls.push((name, String::new()));
                break;
            }
        }
    }
    (String::new(), calls)
}
