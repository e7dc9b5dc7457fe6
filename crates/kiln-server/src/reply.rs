//! A reply's text read as the parts it adds, for the APIs that give replies as typed parts
//! (the Responses API's output items, the Messages API's content blocks): reasoning, answer
//! text, a call opened, more of its arguments. Both read a reply through this one reader.

use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, BoxStream, StreamExt};
use kiln_frontend::ReasoningStream;
use serde_json::Value;

use crate::error::ApiError;
use crate::sse::{ChoiceItem, sse_typed};
use crate::tool_format::ToolFormat;
use crate::tool_stream::{self, ToolStream};

/// What the reply adds, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
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
    pub fn new(reasoning: ReasoningStream, tools: Option<ToolFormat>) -> Self {
        ReplyReader {
            reasoning,
            tools: tools.map(|f| (f, ToolStream::new(f))),
        }
    }

    /// Takes the reply's next text, which `tokens` generated tokens wrote (`finish`: on its
    /// last delta); returns what it adds.
    pub fn push(&mut self, text: &str, tokens: usize, finish: Option<&str>) -> Vec<Piece> {
        let split = self.reasoning.push_tokens(text, tokens, finish.is_some());
        let mut out = Vec::new();
        if !split.reasoning.is_empty() {
            out.push(Piece::Reasoning(split.reasoning));
        }
        match &mut self.tools {
            None if split.content.is_empty() => {}
            None => out.push(Piece::Text(split.content)),
            Some((format, s)) => {
                out.extend(
                    s.pieces(&split.content, || format.new_call_id())
                        .into_iter()
                        .map(|p| match p {
                            tool_stream::Piece::Content(t) => Piece::Text(t),
                            tool_stream::Piece::Call { id, name, .. } => {
                                Piece::Call { call_id: id, name }
                            }
                            tool_stream::Piece::Args { text, .. } => Piece::Args(text),
                        }),
                );
                // A reply cut before it reads as an answer or calls (the generic format's
                // JSON, say) is given as written, as chat gives it.
                if finish == Some("length")
                    && let Some(raw) = s.unsent().filter(|t| !t.is_empty())
                {
                    out.push(Piece::Text(raw.to_string()));
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

/// Answers a one-sequence reply that `on` writes: for each delta, the events it makes and,
/// on the last, the finished body. Streamed: `head` and then every event, as typed SSE events;
/// whole: the body once finished, or the reply's error.
pub async fn respond(
    mut items: BoxStream<'static, ChoiceItem>,
    streamed: bool,
    head: Vec<Value>,
    mut on: impl FnMut(ChoiceItem) -> (Vec<Value>, Option<Value>) + Send + 'static,
) -> Result<Response, ApiError> {
    if streamed {
        let body = items.flat_map(move |item| stream::iter(on(item).0));
        return Ok(sse_typed(stream::iter(head).chain(body)));
    }
    let mut done = None;
    while let Some(item) = items.next().await {
        if let Err(e) = &item.result {
            return Err(e.clone());
        }
        done = on(item).1.or(done);
    }
    let body = done.ok_or_else(|| ApiError::internal("the reply ended unfinished"))?;
    Ok(axum::Json(body).into_response())
}
