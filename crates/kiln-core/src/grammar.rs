//! [`Grammar`]: what a constrained request's output must match. The front ends read it from
//! requests; the engine compiles it into a matcher per sequence.

use serde_json::Value;

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
    /// the output starts with its reasoning and `</think>`. `budget`: at most this many
    /// tokens inside the block, after which `</think>` is written for the model.
    AfterReasoning {
        opened: bool,
        budget: Option<usize>,
        grammar: Box<Grammar>,
    },
}

impl Grammar {
    /// Any text at all (what a reasoning budget holds after the block when nothing else is
    /// asked for).
    pub fn any_text() -> Grammar {
        Grammar::Lark("start: /(?s:.*)/\n".into())
    }
}
