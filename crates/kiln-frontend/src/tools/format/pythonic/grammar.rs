//! The grammar of Python call lists: each offered tool's name, its parameters as keyword
//! arguments (the required ones first), each value a Python literal of its JSON schema's type,
//! enum, string length and integer bounds; an object with properties a dict of those keys,
//! typed the same way.

use kiln_core::{Grammar, lark_string};
use serde_json::Value;

/// The grammar of a reply that calls `offered` as a Python list: each call one of their names
/// with its parameters as keyword arguments, the required ones first in the schema's order
/// and then any of the others in order, each value a Python literal of the parameter's type.
/// `auto`: any text not opening with `[` is an answer.
pub(in crate::tools::format) fn grammar(
    offered: &[(&str, Value)],
    auto: bool,
    parallel: bool,
) -> Grammar {
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
    keyed(&format!("opt{i}"), params, |k| format!("{k}="), rules)
}

/// The rule expression of `schema`'s properties as `key(k) value` items joined by `", "`,
/// the required ones first in the schema's order, then any of the others in order (rules it
/// needs pushed to `rules`, the optional items' named from `name`); `None` without
/// properties.
fn keyed(
    name: &str,
    schema: &Value,
    key: impl Fn(&str) -> String,
    rules: &mut Vec<String>,
) -> Option<String> {
    let props = schema.get("properties").and_then(Value::as_object)?;
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut item =
        |k: &str, schema: &Value| format!("{} {}", lark_string(&key(k)), value_rule(schema, rules));
    let (mut req, mut opt) = (Vec::new(), Vec::new());
    for (k, schema) in props {
        match required.contains(&k.as_str()) {
            true => req.push(item(k, schema)),
            false => opt.push(item(k, schema)),
        }
    }
    // {name}_{j}: a non-empty ordered choice of the optional items from the j-th on.
    for j in (0..opt.len()).rev() {
        let tail = match j + 1 < opt.len() {
            true => format!(" (\", \" {name}_{next})? | {name}_{next}", next = j + 1),
            false => String::new(),
        };
        rules.push(format!("{name}_{j}: {}{tail}", opt[j]));
    }
    let mut parts = Vec::new();
    if !req.is_empty() {
        parts.push(req.join(" \", \" "));
    }
    if !opt.is_empty() {
        let lead = if req.is_empty() { "" } else { "\", \" " };
        parts.push(format!("({lead}{name}_0)?"));
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
        "object" => object_rule(schema, rules),
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

/// A dict literal: of the schema's properties where it lists them (their keys as string
/// literals, typed values; an empty list, `{}` only), any dict otherwise.
fn object_rule(schema: &Value, rules: &mut Vec<String>) -> String {
    if schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none()
    {
        return "pydict".into();
    }
    // A name no other dict takes, nested ones (named while this one's items are written)
    // included.
    rules.push(String::new());
    let name = format!("dict{}", rules.len());
    let key = |k: &str| format!("{}: ", python_literal(&Value::from(k)));
    match keyed(&name, schema, key, rules) {
        Some(items) => format!("(\"{{\" {items} \"}}\")"),
        None => "\"{}\"".into(),
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
