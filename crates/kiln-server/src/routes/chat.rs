//! `POST /v1/chat/completions`.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use serde_json::{Value, json};

use super::{now_s, random_id, token_text};
use crate::api::ChatRequest;
use crate::error::{ApiError, ApiJson};
use crate::generate::TokenLogprob;
use crate::sse::{Usage, choices, sse};
use crate::state::Shared;

pub async fn chat_completions(State(st): State<Shared>, ApiJson(req): ApiJson<ChatRequest>) -> Result<Response, ApiError> {
    st.check_model(req.model.as_deref())?;
    let logprobs = match (req.logprobs.unwrap_or(false), req.top_logprobs) {
        (true, t) => Some(t.unwrap_or(0)),
        (false, Some(t)) if t > 0 => return Err(ApiError::bad_param("top_logprobs", "top_logprobs requires logprobs to be true")),
        (false, _) => None,
    };
    let spec = st.gen_spec(&req.sampling, req.max_completion_tokens.or(req.sampling.max_tokens), logprobs)?;
    let prompt = super::render::chat_prompt(&st, &req.messages)?;
    let max_tokens = st.check_prompt(&prompt, spec.max_tokens, None)?;
    let seqs = st.submit(&prompt, max_tokens, &spec)?;
    let (id, created, model) = (random_id("chatcmpl"), now_s(), st.config.served_model_name.clone());
    let usage = Arc::new(Mutex::new(Usage { prompt_tokens: prompt.len(), ..Usage::default() }));

    if req.sampling.stream.unwrap_or(false) {
        let include_usage = req.sampling.stream_options.as_ref().and_then(|o| o.include_usage).unwrap_or(false);
        let chunk = {
            let (id, model) = (id.clone(), model.clone());
            move |choices: Value, usage: Option<Value>| {
                let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices});
                if let Some(u) = usage {
                    c["usage"] = u;
                }
                c
            }
        };
        let heads: Vec<Value> = (0..seqs.len())
            .map(|i| chunk(json!([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]), None))
            .collect();
        let (st2, chunk2, usage2) = (st.clone(), chunk.clone(), usage.clone());
        let body = choices(seqs, spec.n, usage.clone()).map(move |item| match item.result {
            Ok(d) => {
                let lp = if logprobs.is_some() { logprobs_json(&st2, &d.logprobs) } else { Value::Null };
                let delta = if d.text.is_empty() && d.finish.is_some() { json!({}) } else { json!({"content": d.text}) };
                chunk2(json!([{"index": item.index, "delta": delta, "logprobs": lp, "finish_reason": d.finish}]), None)
            }
            Err(e) => e.body(),
        });
        let tail = stream::once(async move { include_usage.then(|| chunk(json!([]), Some(usage2.lock().unwrap().json()))) })
            .filter_map(|x| async move { x });
        let log_id = id.clone();
        tracing::info!(id = %log_id, prompt_tokens = prompt.len(), n = spec.n, max_tokens, "chat completion (stream)");
        return Ok(sse(stream::iter(heads).chain(body).chain(tail)));
    }

    let results = futures_util::future::join_all(seqs.into_iter().map(|s| s.collect())).await;
    let mut out = Vec::new();
    for (index, r) in results.into_iter().enumerate() {
        let (seq, d) = r?;
        usage.lock().unwrap().add(index / spec.n, &seq);
        let lp = if logprobs.is_some() { logprobs_json(&st, &d.logprobs) } else { Value::Null };
        out.push(json!({
            "index": index,
            "message": {"role": "assistant", "content": d.text},
            "logprobs": lp,
            "finish_reason": d.finish.unwrap_or("stop"),
        }));
    }
    let usage = usage.lock().unwrap().clone();
    tracing::info!(id = %id, prompt_tokens = usage.prompt_tokens, completion_tokens = usage.completion_tokens, cached_tokens = usage.cached.iter().sum::<usize>(), "chat completion");
    Ok(axum::Json(json!({
        "id": id, "object": "chat.completion", "created": created, "model": model,
        "choices": out, "usage": usage.json(),
    }))
    .into_response())
}

fn logprobs_json(st: &Shared, lps: &[TokenLogprob]) -> Value {
    let tok = &st.model.tokenizer;
    let entry = |id: u32, lp: f32| {
        let t = token_text(tok, id);
        json!({"token": t, "logprob": lp, "bytes": t.as_bytes()})
    };
    let content: Vec<Value> = lps
        .iter()
        .map(|l| {
            let mut e = entry(l.id, l.logprob);
            e["top_logprobs"] = l.top.iter().map(|&(id, lp)| entry(id, lp)).collect();
            e
        })
        .collect();
    json!({"content": content})
}
