//! Calls written as a Python list of function calls with keyword arguments, the whole reply:
//! `[get_weather(city="Oslo", days=3), get_time()]` (Llama 3.2's and Llama 4's templates that
//! describe this syntax, and vLLM's `pythonic` parser). Argument values are Python literals:
//! strings in either quote, numbers, `True`, `False`, `None`, lists and dicts, turned into
//! JSON for the reply's `arguments`. Llama 4 wraps the list in `<|python_start|>` and
//! `<|python_end|>`, which are taken off.

use kiln_core::{Grammar, lark_string};
use serde_json::{Map, Number, Value};

use super::Reply;
use crate::tools::compact_json;

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

/// The grammar of a reply that calls `offered` as a Python list: each call one of their names
/// with its parameters as keyword arguments, the required ones first in the schema's order
/// and then any of the others in order, each value a Python literal of the parameter's type.
/// `auto`: any text not opening with `[` is an answer.
pub(super) fn grammar(offered: &[(&str, Value)], auto: bool, parallel: bool) -> Grammar {
    let mut rules = Vec::new();
    let mut calls = Vec::new();
    for (i, (name, params)) in offered.iter().enumerate() {
        let args = args_rule(i, params, &mut rules).map_or(String::new(), |a| format!("{a} "));
        let open = lark_string(&format!("{name}("));
        rules.push(format!("call{i}: {open} {args}\")\""));
        calls.push(format!("call{i}"));
    }
    let more = if parallel { " (\", \" call)*" } else { "" };
    let start = match auto {
        true => "start: TEXT | calls\nTEXT: /([^\\[](?s:.*))?/\n",
        false => "start: calls\n",
    };
    Grammar::Lark(format!(
        "{start}calls: \"[\" call{more} \"]\"\ncall: {}\n{}\n{GENERIC}",
        calls.join(" | "),
        rules.join("\n"),
    ))
}

/// Python literals of any type, and the terminals of the typed ones.
const GENERIC: &str = r#"pyval: PYSTR | NUM | "True" | "False" | "None" | pylist | pydict
pylist: "[" (pyval (", " pyval)*)? "]"
pydict: "{" (PYSTR ": " pyval (", " PYSTR ": " pyval)*)? "}"
PYSTR: /"([^"\\\n]|\\.)*"/ | /'([^'\\\n]|\\.)*'/
INT: /-?(0|[1-9][0-9]*)/
NUM: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/
"#;

/// The rule expression of call `i`'s arguments (rules it needs pushed to `rules`); `None`
/// for a function without parameters.
fn args_rule(i: usize, params: &Value, rules: &mut Vec<String>) -> Option<String> {
    let props = params.get("properties").and_then(Value::as_object)?;
    let required: Vec<&str> = (params.get("required").and_then(Value::as_array))
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut arg = |k: &str, schema: &Value| {
        format!(
            "{} {}",
            lark_string(&format!("{k}=")),
            value_rule(schema, rules)
        )
    };
    let (mut req, mut opt) = (Vec::new(), Vec::new());
    for (k, schema) in props {
        match required.contains(&k.as_str()) {
            true => req.push(arg(k, schema)),
            false => opt.push(arg(k, schema)),
        }
    }
    // opt{i}_{j}: a non-empty ordered choice of the optional arguments from the j-th on.
    for j in (0..opt.len()).rev() {
        let tail = match j + 1 < opt.len() {
            true => format!(" (\", \" opt{i}_{next})? | opt{i}_{next}", next = j + 1),
            false => String::new(),
        };
        rules.push(format!("opt{i}_{j}: {}{tail}", opt[j]));
    }
    let mut parts = Vec::new();
    if !req.is_empty() {
        parts.push(req.join(" \", \" "));
    }
    if !opt.is_empty() {
        let lead = if req.is_empty() { "" } else { "\", \" " };
        parts.push(format!("({lead}opt{i}_0)?"));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The rule expression of a value fitting `schema`, as a Python literal.
fn value_rule(schema: &Value, rules: &mut Vec<String>) -> String {
    let literal = |v: &Value| lark_string(&python_literal(v));
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let alts: Vec<String> = values.iter().map(literal).collect();
        return format!("({})", alts.join(" | "));
    }
    if let Some(v) = schema.get("const") {
        return literal(v);
    }
    if let Some(any) =
        (schema.get("anyOf").or_else(|| schema.get("oneOf"))).and_then(Value::as_array)
    {
        let alts: Vec<String> = any.iter().map(|s| value_rule(s, rules)).collect();
        return format!("({})", alts.join(" | "));
    }
    let of_type = |t: &str, rules: &mut Vec<String>| match t {
        "string" => string_rule(schema, rules),
        "integer" => integer_rule(schema, rules),
        "number" => "NUM".to_string(),
        "boolean" => "(\"True\" | \"False\")".to_string(),
        "null" => "\"None\"".to_string(),
        "array" => {
            let item = match schema.get("items") {
                Some(items) => value_rule(items, rules),
                None => "pyval".to_string(),
            };
            format!("(\"[\" ({item} (\", \" {item})*)? \"]\")")
        }
        "object" => "pydict".to_string(),
        _ => "pyval".to_string(),
    };
    match schema.get("type") {
        Some(Value::String(t)) => of_type(t, rules),
        Some(Value::Array(ts)) => {
            let alts: Vec<String> = (ts.iter().filter_map(Value::as_str))
                .map(|t| of_type(t, rules))
                .collect();
            format!("({})", alts.join(" | "))
        }
        _ => "pyval".to_string(),
    }
}

/// A string literal, of the schema's `minLength` to `maxLength` characters where it has them
/// (an escape counting as one).
fn string_rule(schema: &Value, rules: &mut Vec<String>) -> String {
    let bound = |k: &str| schema.get(k).and_then(Value::as_u64);
    let (min, max) = (bound("minLength"), bound("maxLength"));
    if min.is_none() && max.is_none() {
        return "PYSTR".into();
    }
    let count = format!(
        "{{{},{}}}",
        min.unwrap_or(0),
        max.map_or(String::new(), |m| m.to_string())
    );
    let name = format!("PYSTR{}", rules.len());
    rules.push(format!(
        r#"{name}: /"([^"\\\n]|\\.){count}"/ | /'([^'\\\n]|\\.){count}'/"#
    ));
    name
}

/// An integer literal within the schema's bounds (`minimum`, `maximum` and their exclusive
/// forms) where it has any.
fn integer_rule(schema: &Value, rules: &mut Vec<String>) -> String {
    let get = |k: &str| schema.get(k).and_then(Value::as_f64);
    let pick = |a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64| match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    };
    let min = pick(
        get("minimum").map(f64::ceil),
        get("exclusiveMinimum").map(|m| m.floor() + 1.0),
        f64::max,
    );
    let max = pick(
        get("maximum").map(f64::floor),
        get("exclusiveMaximum").map(|m| m.ceil() - 1.0),
        f64::min,
    );
    if min.is_none() && max.is_none() {
        return "INT".into();
    }
    let clamp = |v: f64| v.clamp(i64::MIN as f64, i64::MAX as f64) as i64;
    let name = format!("INT{}", rules.len());
    let regex = int_regex(min.map(clamp), max.map(clamp));
    rules.push(format!("{name}: /{regex}/"));
    name
}

/// A regular expression of the integers from `min` to `max` (either open), written without
/// leading zeros; one that matches nothing when the range is empty.
pub(crate) fn int_regex(min: Option<i64>, max: Option<i64>) -> String {
    if let (Some(lo), Some(hi)) = (min, max)
        && lo > hi
    {
        return "[^\\s\\S]".into();
    }
    let mut alts = Vec::new();
    // 0 and up.
    if max.is_none_or(|m| m >= 0) {
        let lo = min.map_or(0, |m| m.max(0)) as u64;
        alts.push(magnitudes(lo, max.map(|m| m as u64)));
    }
    // Below 0: a minus sign and the magnitudes.
    if min.is_none_or(|m| m < 0) {
        let lo = max.map_or(1, |m| if m < 0 { m.unsigned_abs() } else { 1 });
        let hi = min.map(i64::unsigned_abs);
        alts.push(format!("-({})", magnitudes(lo, hi)));
    }
    format!("({})", alts.join("|"))
}

/// The numbers from `lo` to `hi` (open: no end) as a regular expression.
fn magnitudes(lo: u64, hi: Option<u64>) -> String {
    match hi {
        Some(hi) => digit_ranges(lo, hi),
        None => {
            // Up to the largest number of lo's length, then any longer one.
            let len = lo.to_string().len();
            let top = 10u64.saturating_pow(len as u32) - 1;
            format!("{}|[1-9][0-9]{{{len},}}", digit_ranges(lo, top))
        }
    }
}

/// `lo..=hi` as alternatives each of one length, digit classes position by position.
fn digit_ranges(lo: u64, hi: u64) -> String {
    let mut stops = vec![hi];
    let text = lo.to_string();
    for nines in 1..=text.len() + 1 {
        let keep = text.len().saturating_sub(nines);
        let stop: u64 = format!("{}{}", &text[..keep], "9".repeat(nines))
            .parse()
            .unwrap_or(u64::MAX);
        if (lo..=hi).contains(&stop) {
            stops.push(stop);
        }
    }
    for zeros in 1..=20u32 {
        let Some(p) = 10u64.checked_pow(zeros) else {
            break;
        };
        let stop = (hi.saturating_add(1) / p * p).wrapping_sub(1);
        if lo < stop && stop <= hi {
            stops.push(stop);
        }
    }
    stops.sort_unstable();
    stops.dedup();
    let mut start = lo;
    let mut alts = Vec::new();
    for stop in stops {
        if stop < start {
            continue;
        }
        let (a, b) = (start.to_string(), stop.to_string());
        let pattern: String = (a.chars().zip(b.chars()))
            .map(|(x, y)| match (x, y) {
                _ if x == y => x.to_string(),
                ('0', '9') => "[0-9]".to_string(),
                _ => format!("[{x}-{y}]"),
            })
            .collect();
        alts.push(pattern);
        start = stop.saturating_add(1);
    }
    alts.join("|")
}

/// `v` as Python writes it (strings double-quoted with JSON's escapes, which Python reads
/// alike).
fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(python_literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) => format!(
            "{{{}}}",
            (o.iter())
                .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), python_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// A reader of Python call syntax.
struct Cursor<'a> {
    s: &'a str,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Cursor { s }
    }

    fn rest(&self) -> &'a str {
        self.s
    }

    fn ws(&mut self) {
        self.s = self.s.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        match self.s.strip_prefix(c) {
            Some(rest) => {
                self.s = rest;
                true
            }
            None => false,
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        match self.s.strip_prefix(w) {
            Some(rest) if !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') => {
                self.s = rest;
                true
            }
            _ => false,
        }
    }

    /// A function or parameter name (dots and dashes allowed, as tool names have them).
    fn name(&mut self) -> Option<String> {
        let end = (self.s)
            .find(|c: char| !(c.is_alphanumeric() || "_.-".contains(c)))
            .unwrap_or(self.s.len());
        let name = &self.s[..end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) || end == self.s.len()
        {
            return None;
        }
        self.s = &self.s[end..];
        Some(name.to_string())
    }

    /// Keyword arguments up to and including the closing `)`.
    fn args(&mut self) -> Option<Map<String, Value>> {
        let mut args = Map::new();
        loop {
            self.ws();
            if self.eat(')') {
                return Some(args);
            }
            if !args.is_empty() {
                if !self.eat(',') {
                    return None;
                }
                self.ws();
                if self.eat(')') {
                    return Some(args);
                }
            }
            let key = self.name()?;
            self.ws();
            if !self.eat('=') {
                return None;
            }
            self.ws();
            let value = self.value()?;
            args.insert(key, value);
        }
    }

    /// A Python literal.
    fn value(&mut self) -> Option<Value> {
        let c = self.s.chars().next()?;
        match c {
            '"' | '\'' => self.string(c).map(Value::String),
            '[' | '(' => {
                let close = if c == '[' { ']' } else { ')' };
                self.eat(c);
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.eat(close) {
                        return Some(Value::Array(items));
                    }
                    if !items.is_empty() {
                        if !self.eat(',') {
                            return None;
                        }
                        self.ws();
                        if self.eat(close) {
                            return Some(Value::Array(items));
                        }
                    }
                    items.push(self.value()?);
                }
            }
            '{' => {
                self.eat('{');
                let mut map = Map::new();
                loop {
                    self.ws();
                    if self.eat('}') {
                        return Some(Value::Object(map));
                    }
                    if !map.is_empty() {
                        if !self.eat(',') {
                            return None;
                        }
                        self.ws();
                        if self.eat('}') {
                            return Some(Value::Object(map));
                        }
                    }
                    let q = self.s.chars().next()?;
                    let key = match q {
                        '"' | '\'' => self.string(q)?,
                        _ => return None,
                    };
                    self.ws();
                    if !self.eat(':') {
                        return None;
                    }
                    self.ws();
                    map.insert(key, self.value()?);
                }
            }
            _ if self.eat_word("True") => Some(Value::Bool(true)),
            _ if self.eat_word("False") => Some(Value::Bool(false)),
            _ if self.eat_word("None") => Some(Value::Null),
            _ => self.number(),
        }
    }

    /// A string literal in quote `q`, with Python's escapes.
    fn string(&mut self, q: char) -> Option<String> {
        let mut out = String::new();
        let mut chars = self.s.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '\n' => return None,
                '\\' => {
                    let (_, e) = chars.next()?;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '0' => out.push('\0'),
                        'x' | 'u' => {
                            let len = if e == 'x' { 2 } else { 4 };
                            let hex: String =
                                (0..len).filter_map(|_| chars.next().map(|c| c.1)).collect();
                            let code = u32::from_str_radix(&hex, 16).ok()?;
                            out.push(char::from_u32(code)?);
                        }
                        other => out.push(other),
                    }
                }
                c if c == q => {
                    self.s = &self.s[i + c.len_utf8()..];
                    return Some(out);
                }
                c => out.push(c),
            }
        }
        None
    }

    /// An integer or a float.
    fn number(&mut self) -> Option<Value> {
        let end = (self.s)
            .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
            .unwrap_or(self.s.len());
        if end == self.s.len() {
            return None; // the number may go on
        }
        let text = &self.s[..end];
        // Integers past 64 bits (Python has no limit) become floating point, as JSON parsers
        // read them.
        let v = match (text.parse::<i64>(), text.parse::<u64>()) {
            (Ok(i), _) => Value::from(i),
            (_, Ok(u)) => Value::from(u),
            _ => Value::Number(Number::from_f64(text.parse::<f64>().ok()?)?),
        };
        self.s = &self.s[end..];
        Some(v)
    }
}
