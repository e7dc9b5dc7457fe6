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
    let mut c = Cursor::new(body(text));
    if c.eat('[') {
        let (calls, closed) = scan(&mut c);
        c.ws();
        if closed && c.rest().is_empty() && !calls.is_empty() {
            return (None, calls);
        }
    }
    (Some(text.to_string()), Vec::new())
}

/// The calls after a list's `[` as far as they go (a call cut inside its arguments comes
/// with none yet), and whether the list's `]` closed them all.
fn scan(c: &mut Cursor) -> (Vec<(String, String)>, bool) {
    let mut calls = Vec::new();
    loop {
        c.ws();
        if c.eat(']') {
            return (calls, true);
        }
        if !calls.is_empty() {
            if !c.eat(',') {
                return (calls, false);
            }
            c.ws();
        }
        let Some(name) = c.name() else {
            return (calls, false);
        };
        c.ws();
        if !c.eat('(') {
            return (calls, false);
        }
        match c.args() {
            Some(args) => calls.push((name, compact_json(&Value::Object(args)))),
            None => {
                calls.push((name, String::new()));
                return (calls, false);
            }
        }
    }
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
    (String::new(), scan(&mut c).0)
}
