//! JSON text exactly as Python's `json.dumps` writes it, which is what the `tojson` filter of
//! a chat template produces under transformers: `", "` and `": "` separators (`","` once
//! indented), keys in insertion order, no HTML escaping, non-ASCII kept unless `ensure_ascii`,
//! floats in Python's shortest `repr` (`1e-05`, `1e+16`, `2.0`), `NaN` and `Infinity`.

use std::fmt::Write;

use minijinja::value::{Value, ValueKind};

/// The `json.dumps` options a template can pass to `tojson`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonStyle {
    /// `None`: one line. `Some(s)`: a new line per item, indented by `s` per level.
    pub indent: Option<String>,
    pub ensure_ascii: bool,
    pub sort_keys: bool,
    /// `(item, key)` separators; Python's defaults when `None`.
    pub separators: Option<(String, String)>,
}

/// Encodes `value` as `json.dumps(value, **style)` would. Values JSON has no form for
/// (undefined, functions, bytes) are an error naming their kind, as Python's `TypeError` is.
pub fn to_python_json(value: &Value, style: &JsonStyle) -> Result<String, String> {
    let (item, key) = match &style.separators {
        Some((i, k)) => (i.as_str(), k.as_str()),
        None if style.indent.is_some() => (",", ": "),
        None => (", ", ": "),
    };
    let mut w = Writer {
        out: String::new(),
        style,
        item,
        key,
    };
    w.value(value, 0)?;
    Ok(w.out)
}

struct Writer<'a> {
    out: String,
    style: &'a JsonStyle,
    item: &'a str,
    key: &'a str,
}

impl Writer<'_> {
    fn value(&mut self, v: &Value, depth: usize) -> Result<(), String> {
        match v.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => self.number(v),
            ValueKind::String => self.string(v.as_str().unwrap_or_default()),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter().map_err(|e| e.to_string())?.collect();
                self.open_close('[', ']', items.len(), depth, |w, i| {
                    w.value(&items[i], depth + 1)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter().map_err(|e| e.to_string())?.collect();
                if self.style.sort_keys {
                    keys.sort();
                }
                self.open_close('{', '}', keys.len(), depth, |w, i| {
                    let k = &keys[i];
                    match k.as_str() {
                        Some(s) => w.string(s),
                        None => w.string(&k.to_string()),
                    }
                    w.out.push_str(w.key);
                    let item = v.get_item(k).map_err(|e| e.to_string())?;
                    w.value(&item, depth + 1)
                })?;
            }
            other => return Err(format!("Object of type {other} is not JSON serializable")),
        }
        Ok(())
    }

    /// Writes `n` items between `open` and `close`, on their own lines when indented.
    fn open_close(
        &mut self,
        open: char,
        close: char,
        n: usize,
        depth: usize,
        mut item: impl FnMut(&mut Self, usize) -> Result<(), String>,
    ) -> Result<(), String> {
        self.out.push(open);
        if n > 0 {
            for i in 0..n {
                if i > 0 {
                    self.out.push_str(self.item);
                }
                self.newline(depth + 1);
                item(self, i)?;
            }
            self.newline(depth);
        }
        self.out.push(close);
        Ok(())
    }

    fn newline(&mut self, depth: usize) {
        if let Some(indent) = &self.style.indent {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(indent);
            }
        }
    }

    fn number(&mut self, v: &Value) {
        if v.is_integer() {
            // Integers print as they are, however wide.
            self.out.push_str(&v.to_string());
        } else {
            let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
            self.out.push_str(&python_float(f));
        }
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(self.out, "\\u{:04x}", c as u32);
                }
                c if self.style.ensure_ascii && !(' '..='~').contains(&c) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(self.out, "\\u{u:04x}");
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, in positional form for
/// decimal exponents -4..16 and scientific (two-digit exponent at least) otherwise.
pub(crate) fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // `{:e}` gives the shortest round-trip digits: "-1.5e-7", "2e16", "0e0".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        for (f, want) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (2.0, "2.0"),
            (0.5, "0.5"),
            (21.5, "21.5"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (-1.5e-7, "-1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.25e100, "1.25e+100"),
            (123456.789, "123456.789"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(python_float(f), want, "{f}");
        }
    }

    #[test]
    fn strings_escape_as_json_dumps() {
        let v = Value::from("a\"b\\c\n\u{1}<&>é😀\u{7f}");
        let plain = to_python_json(&v, &JsonStyle::default()).unwrap();
        assert_eq!(plain, "\"a\\\"b\\\\c\\n\\u0001<&>é😀\u{7f}\"");
        let ascii = JsonStyle {
            ensure_ascii: true,
            ..JsonStyle::default()
        };
        assert_eq!(
            to_python_json(&v, &ascii).unwrap(),
            "\"a\\\"b\\\\c\\n\\u0001<&>\\u00e9\\ud83d\\ude00\\u007f\""
        );
    }

    #[test]
    fn containers_follow_indent_and_separators() {
        let v = Value::from_serialize(serde_json::json!({"b": [1, 2.5, null], "a": {}, "c": []}));
        let style = |indent: Option<&str>, sort_keys| JsonStyle {
            indent: indent.map(str::to_string),
            sort_keys,
            ..JsonStyle::default()
        };
        assert_eq!(
            to_python_json(&v, &style(None, false)).unwrap(),
            r#"{"b": [1, 2.5, null], "a": {}, "c": []}"#
        );
        assert_eq!(
            to_python_json(&v, &style(Some("  "), true)).unwrap(),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    2.5,\n    null\n  ],\n  \"c\": []\n}"
        );
        let compact = JsonStyle {
            separators: Some((",".into(), ":".into())),
            ..JsonStyle::default()
        };
        assert_eq!(
            to_python_json(&v, &compact).unwrap(),
            r#"{"b":[1,2.5,null],"a":{},"c":[]}"#
        );
    }
}
