//! [`Grammar`]: what a constrained request's output must match. The front ends read it from
//! requests; the engine compiles it into a matcher per sequence.

use serde_json::{Value, json};

#[derive(Clone, Debug, PartialEq)]
pub enum Grammar {
    /// Any JSON object.
    JsonObject,
    /// A JSON value valid under this JSON schema.
    JsonSchema(Value),
    /// A regular expression (Rust `regex` syntax) matching the whole output.
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A grammar in llguidance's Lark syntax.
    Lark(String),
    /// `grammar` after the reasoning of a model that thinks in `<think>` blocks: a block
    /// first, then the grammar (optional block). `opened`: the prompt opened the block, so
    /// the output starts with its reasoning and `</think>`.
    AfterReasoning { opened: bool, grammar: Box<Grammar> },
    /// `grammar` inside a frame: a grammar in llguidance's Lark syntax in which `@answer`
    /// stands for `grammar` (gpt-oss's messages around its answer, say).
    Within {
        frame: String,
        grammar: Box<Grammar>,
    },
    /// `grammar`, with at most `tokens` tokens of reasoning written between `tags` (their
    /// closing tag's tokens included), after which the closing tag is written for the model.
    /// `opened`: the prompt opened the reasoning, so the output starts inside it.
    Budgeted {
        tags: ReasoningTags,
        tokens: usize,
        opened: bool,
        grammar: Box<Grammar>,
    },
}

/// How a model's reasoning is marked in its output: the tags the front end splits replies at
/// and a reasoning budget counts between.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReasoningTags {
    /// A `<think>` ... `</think>` block, which only the start of a reply may open.
    Think,
    /// gpt-oss's `analysis` messages (`<|channel|>analysis<|message|>` ... `<|end|>`),
    /// wherever in the reply; the budget is shared by all of them.
    Harmony,
}

impl ReasoningTags {
    pub const fn open(self) -> &'static str {
        match self {
            ReasoningTags::Think => "<think>",
            ReasoningTags::Harmony => "<|channel|>analysis<|message|>",
        }
    }

    pub const fn close(self) -> &'static str {
        match self {
            ReasoningTags::Think => "</think>",
            ReasoningTags::Harmony => "<|end|>",
        }
    }

    /// Whether reasoning may open anywhere in a reply, not only at its start.
    pub const fn anywhere(self) -> bool {
        matches!(self, ReasoningTags::Harmony)
    }
}

impl Grammar {
    /// Any text at all (what a reasoning budget holds after the block when nothing else is
    /// asked for).
    pub fn any_text() -> Grammar {
        Grammar::Lark("start: /(?s:.*)/\n".into())
    }
}

/// The JSON layout kiln asks for: compact separators with one space, no free whitespace, so
/// a small model cannot run away in indentation.
pub fn compact_schema(mut schema: Value) -> Value {
    if let Value::Object(m) = &mut schema {
        m.insert(
            "x-guidance".into(),
            json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}),
        );
    }
    schema
}

/// A Lark string literal for `s`.
pub fn lark_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `s` as the body of a Lark `/regex/` matching it literally: only the metacharacters
/// escaped (`\<` would be a word boundary), control characters as `\x{..}`.
pub fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '/' => format!("\\{c}"),
            c if c.is_control() => format!("\\x{{{:x}}}", c as u32),
            c => c.to_string(),
        })
        .collect()
}
