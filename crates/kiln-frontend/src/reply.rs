//! A reply's text read as the parts it adds, for the front ends that give replies as typed
//! parts (the server's Responses API output items and Messages API content blocks, the
//! browser's chat events): reasoning, answer text, a call opened, more of its arguments. All
//! read a reply through this one reader.

use crate::ReasoningStream;
use crate::tools::{self, ToolFormat, ToolPlan, ToolStream};

/// What the reply adds, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyPart {
    Reasoning(String),
    Text(String),
    Call { call_id: String, name: String },
    Args(String),
}

pub struct ReplyReader {
    reasoning: ReasoningStream,
    /// With tools: their syntax, and the parse of the answer so far.
    tools: Option<(ToolFormat, ToolStream)>,
}

impl ReplyReader {
    pub fn new(reasoning: ReasoningStream, tools: Option<&ToolPlan>) -> Self {
        ReplyReader {
            reasoning,
            tools: tools.map(|p| (p.format, ToolStream::for_plan(p))),
        }
    }

    /// Takes the reply's next text, which `tokens` generated tokens wrote (`finish`: on its
    /// last delta); returns what it adds.
    pub fn push(&mut self, text: &str, tokens: usize, finish: Option<&str>) -> Vec<ReplyPart> {
        let split = self.reasoning.push_tokens(text, tokens, finish.is_some());
        let mut out = Vec::new();
        if !split.reasoning.is_empty() {
            out.push(ReplyPart::Reasoning(split.reasoning));
        }
        match &mut self.tools {
            None if split.content.is_empty() => {}
            None => out.push(ReplyPart::Text(split.content)),
            Some((format, s)) => {
                out.extend(
                    s.pieces(&split.content, || format.new_call_id())
                        .into_iter()
                        .map(|p| match p {
                            tools::Piece::Content(t) => ReplyPart::Text(t),
                            tools::Piece::Call { id, name, .. } => {
                                ReplyPart::Call { call_id: id, name }
                            }
                            tools::Piece::Args { text, .. } => ReplyPart::Args(text),
                        }),
                );
                // A reply cut before it reads as an answer or calls (the generic format's
                // JSON, say) is given as written, as chat gives it.
                if finish == Some("length")
                    && let Some(raw) = s.unsent().filter(|t| !t.is_empty())
                {
                    out.push(ReplyPart::Text(raw.to_string()));
                }
            }
        }
        out
    }

    /// Tokens of the reply so far that wrote its reasoning.
    pub fn reasoning_tokens(&self) -> usize {
        self.reasoning.reasoning_tokens()
    }

    /// Whether the reply has called a tool.
    pub fn called(&self) -> bool {
        self.tools.as_ref().is_some_and(|(_, s)| s.called())
    }
}
