//! `POST /v1/chat/completions` under tools: each choice's text read as calls or content,
//! whole (parsed once finished) or streamed (parsed as it grows, `tool_stream/`).

use std::sync::{Arc, Mutex};

use axum::response::Response;
use futures_util::stream::{self, StreamExt};
use kiln_frontend::ReasoningStream;
use serde_json::{Value, json};

use super::chat::logprobs_json;
use super::prompt_logprobs_json;
use crate::error::ApiError;
use crate::generate::{Sequence, TokenLogprob};
use crate::sse::{Usage, choices, running_usage, sse};
use crate::state::Shared;
use kiln_frontend::tools::ToolPlan;
use kiln_frontend::tools::ToolStream;

/// What a reply under tools reports besides its text, where asked: its tokens'
/// log-probabilities (`as_ids`: named by id) and its prompt's.
pub(super) struct Reported {
    pub st: Shared,
    pub logprobs: bool,
    pub as_ids: bool,
    pub prompt: bool,
}

impl Reported {
    fn logprobs(&self, lps: &[TokenLogprob]) -> Value {
        match self.logprobs {
            true => logprobs_json(&self.st, lps, self.as_ids),
            false => Value::Null,
        }
    }
}

/// A reply under tools, not streamed: each choice runs to the end, then its text is parsed
/// into `tool_calls` (or content). (Streamed, see [`stream_tools`].)
#[allow(clippy::too_many_arguments)]
pub(super) async fn tools_reply(
    plan: ToolPlan,
    reasoning: ReasoningStream,
    seqs: Vec<Sequence>,
    n: usize,
    usage: Arc<Mutex<Usage>>,
    reported: Reported,
    (id, created, model): (String, u64, String),
) -> Result<Value, ApiError> {
    let collect = |s: Sequence| s.collect_split(reasoning.clone());
    let results = futures_util::future::join_all(seqs.into_iter().map(collect)).await;
    let mut choices_out = Vec::new();
    let mut prompt_logprobs = None;
    for (index, r) in results.into_iter().enumerate() {
        let (seq, d, split, thought) = r?;
        if index == 0 && reported.prompt {
            prompt_logprobs = Some(prompt_logprobs_json(&reported.st, &d.prompt_logprobs));
        }
        let lp = reported.logprobs(&d.logprobs);
        usage.lock().unwrap().add(index / n, &seq);
        usage.lock().unwrap().reasoning_tokens += thought;
        let (content, calls, finish) =
            plan.finished_reply(&split.content, d.finish.unwrap_or("stop"));
        choices_out.push((index, split.reasoning, content, calls, finish, lp));
    }
    let usage = usage.lock().unwrap().json();
    let out: Vec<Value> = choices_out
        .into_iter()
        .map(|(index, reasoning, content, calls, finish, lp)| {
            let mut message = json!({"role": "assistant", "content": content});
            if !reasoning.is_empty() {
                message["reasoning_content"] = json!(reasoning);
            }
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            json!({"index": index, "message": message, "logprobs": lp, "finish_reason": finish})
        })
        .collect();
    let mut body = json!({
        "id": id, "object": "chat.completion", "created": created, "model": model, "choices": out, "usage": usage,
    });
    if let Some(pl) = prompt_logprobs {
        body["prompt_logprobs"] = pl;
    }
    Ok(body)
}

/// The streamed reply under tools, each choice's text parsed as it grows and sent as deltas
/// token by token (see `tool_stream/`): the role first, then per choice the deltas its growing
/// text gives, and its finish (`tool_calls`, or `stop` for a named function, once it called).
pub(super) fn stream_tools(
    plan: ToolPlan,
    reasoning: ReasoningStream,
    seqs: Vec<Sequence>,
    (n, usage, (include_usage, each)): (usize, Arc<Mutex<Usage>>, (bool, bool)),
    reported: Reported,
    (id, created, model): (String, u64, String),
) -> Response {
    let chunk = move |choice: Value| json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [choice]});
    // `continuous_usage_stats`: each chunk carries its choice's usage so far.
    let prompt_len = usage.lock().unwrap().prompt_tokens;
    let so_far = move |c: &mut Value, generated| {
        if each {
            c["usage"] = running_usage(prompt_len, generated);
        }
    };
    let heads: Vec<Value> = (0..seqs.len())
        .map(|i| {
            let mut c = chunk(json!({"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}));
            so_far(&mut c, 0);
            c
        })
        .collect();
    let mut streams: Vec<(ReasoningStream, ToolStream)> = (0..seqs.len())
        .map(|_| (reasoning.clone(), ToolStream::for_plan(&plan)))
        .collect();
    // Per choice, the log-probabilities of tokens no chunk has carried yet (their text held
    // back); the first choice's prompt log-probabilities until its first chunk.
    let mut unsent: Vec<Vec<TokenLogprob>> = vec![Vec::new(); streams.len()];
    let mut prompt: Option<Vec<TokenLogprob>> = None;
    let chunk2 = chunk.clone();
    let usage2 = usage.clone();
    let body = choices(seqs, n, usage.clone()).flat_map(move |item| {
        let mut events = Vec::new();
        match item.result {
            Ok(d) => {
                unsent[item.index].extend(d.logprobs.iter().cloned());
                if item.index == 0 && reported.prompt && !d.prompt_logprobs.is_empty() {
                    prompt = Some(d.prompt_logprobs.clone());
                }
                let (r, s) = &mut streams[item.index];
                let split = r.push_tokens(&d.text, d.tokens, d.finish.is_some());
                if d.finish.is_some() {
                    usage2.lock().unwrap().reasoning_tokens += r.reasoning_tokens();
                }
                if !split.reasoning.is_empty() {
                    let delta = json!({"reasoning_content": split.reasoning});
                    events.push(chunk2(json!({"index": item.index, "delta": delta, "logprobs": null, "finish_reason": null})));
                }
                for delta in s.push(&split.content, || plan.format.new_call_id()) {
                    events.push(chunk2(json!({"index": item.index, "delta": delta, "logprobs": null, "finish_reason": null})));
                }
                if let Some(finish) = d.finish {
                    let finish = plan.streamed_finish(s.called(), finish);
                    events.push(chunk2(json!({"index": item.index, "delta": {}, "logprobs": null, "finish_reason": finish})));
                }
                // The first chunk carries what the tokens before it report.
                if let Some(first) = events.first_mut() {
                    let lps = std::mem::take(&mut unsent[item.index]);
                    first["choices"][0]["logprobs"] = reported.logprobs(&lps);
                    if item.index == 0
                        && let Some(pl) = prompt.take()
                    {
                        first["prompt_logprobs"] = prompt_logprobs_json(&reported.st, &pl);
                    }
                }
                for e in &mut events {
                    so_far(e, item.generated);
                }
            }
            Err(e) => events.push(e.body()),
        }
        stream::iter(events)
    });
    let tail = stream::once(async move {
        include_usage.then(|| {
            let mut c = chunk(json!(null));
            c["choices"] = json!([]);
            c["usage"] = usage.lock().unwrap().json();
            c
        })
    })
    .filter_map(|x| async move { x });
    sse(stream::iter(heads).chain(body).chain(tail))
}
