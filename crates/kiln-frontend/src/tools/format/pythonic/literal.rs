//! A reader of Python call syntax: names, keyword arguments and literal values (strings in
//! either quote with Python's escapes, integers and floats, `True`, `False`, `None`, lists,
//! tuples and dicts) as JSON values.

use serde_json::{Map, Number, Value};

/// A reader of Python call syntax.
pub(super) struct Cursor<'a> {
    s: &'a str,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(s: &'a str) -> Self {
        Cursor { s }
    }

    pub(super) fn rest(&self) -> &'a str {
        self.s
    }

    pub(super) fn ws(&mut self) {
        self.s = self.s.trim_start();
    }

    pub(super) fn eat(&mut self, c: char) -> bool {
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
    pub(super) fn name(&mut self) -> Option<String> {
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
    pub(super) fn args(&mut self) -> Option<Map<String, Value>> {
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
