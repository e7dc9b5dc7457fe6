//! Server-sent events: `data: {json}\n\n` chunks ending with `data: [DONE]`, and the merge of
//! a request's `n` sequences into one stream of per-choice deltas.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use serde_json::Value;

use crate::error::ApiError;
use crate::generate::{Delta, Sequence};

/// An SSE response of `events`, then `data: [DONE]`.
pub fn sse(events: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events = events
        .map(|v| Ok::<_, Infallible>(Event::default().data(v.to_string())))
        .chain(stream::once(async { Ok(Event::default().data("[DONE]")) }));
    Sse::new(events).into_response()
}

/// An SSE response of events named by their `type` (the Responses API's form, which ends
/// with its last event rather than `[DONE]`).
pub fn sse_typed(events: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events = events.map(|v| {
        let kind = v["type"].as_str().unwrap_or("message").to_string();
        Ok::<_, Infallible>(Event::default().event(kind).data(v.to_string()))
    });
    Sse::new(events).into_response()
}

/// One delta of one choice.
pub struct ChoiceItem {
    pub index: usize,
    pub result: Result<Delta, ApiError>,
    /// The choice's tokens so far, this delta's included.
    pub generated: usize,
}

/// A choice's usage so far (`stream_options.continuous_usage_stats`), as vLLM reports it.
pub fn running_usage(prompt_tokens: usize, generated: usize) -> Value {
    serde_json::json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": generated,
        "total_tokens": prompt_tokens + generated,
    })
}

/// Token counts of a request's choices, filled in as they finish.
#[derive(Default, Clone, Debug)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Per prompt: the most prompt tokens any of its choices found in the prefix cache.
    pub cached: Vec<usize>,
    /// Tokens of the choices that wrote their reasoning (`ReasoningStream::reasoning_tokens`).
    pub reasoning_tokens: usize,
}

impl Usage {
    pub fn add(&mut self, prompt_index: usize, seq: &Sequence) {
        self.completion_tokens += seq.num_tokens;
        if self.cached.len() <= prompt_index {
            self.cached.resize(prompt_index + 1, 0);
        }
        self.cached[prompt_index] = self.cached[prompt_index].max(seq.num_cached);
    }

    pub fn json(&self) -> Value {
        serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached.iter().sum::<usize>()},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        })
    }
}

/// The deltas of all `seqs` (choice `i` is `seqs[i]`) as they come; each finished sequence's
/// counts go into `usage` (prompt index = choice index / `n`).
pub fn choices(
    seqs: Vec<Sequence>,
    n: usize,
    usage: Arc<Mutex<Usage>>,
) -> BoxStream<'static, ChoiceItem> {
    let per_seq = seqs.into_iter().enumerate().map(move |(index, seq)| {
        let usage = usage.clone();
        stream::unfold(Some(seq), move |s| {
            let usage = usage.clone();
            async move {
                let mut seq = s?;
                match seq.next().await {
                    Ok(Some(d)) => {
                        let last = d.finish.is_some();
                        if last {
                            usage.lock().unwrap().add(index / n, &seq);
                        }
                        Some((
                            ChoiceItem {
                                index,
                                result: Ok(d),
                                generated: seq.num_tokens,
                            },
                            (!last).then_some(seq),
                        ))
                    }
                    Ok(None) => None,
                    Err(e) => Some((
                        ChoiceItem {
                            index,
                            result: Err(e),
                            generated: seq.num_tokens,
                        },
                        None,
                    )),
                }
            }
        })
        .boxed()
    });
    stream::select_all(per_seq).boxed()
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
