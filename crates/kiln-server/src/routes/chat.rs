//! `POST /v1/chat/completions`.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use kiln_frontend::ReasoningFormat;
use serde_json::{Value, json};

use super::chat_tools::{Reported, stream_tools, tools_reply};
use super::{logprob_entry, now_s, prompt_logprobs_json, random_id};

use crate::api::{ChatRequest, StreamOptions};
use crate::error::{ApiError, ApiJson};
use crate::generate::Sequence;
use crate::generate::TokenLogprob;
use crate::kv_transfer;
use crate::sse::{Usage, choices, running_usage, sse};
use crate::state::Shared;
use kiln_engine::Constraint;
use kiln_frontend::tools::ToolPlan;
use kiln_frontend::{Split, requested_grammar};

pub async fn chat_completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    let (spec, plan, prompt, max_tokens) = super::render::checked_chat(&st, &req)?;
    if let Some(search) = super::beam::chat_search(&req)? {
        return super::beam::chat(&st, search, &spec, &prompt, max_tokens).await;
    }
    let logprobs = spec.logprobs;
    let as_ids = (req.return_tokens_as_token_ids).unwrap_or(st.config.return_tokens_as_token_ids);
    let echo = echoed(&req, plan.is_some())?;
    let (constraints, opened) = chat_constraints(&st, &req, plan.as_ref(), spec.n, &prompt)?;
    let stream = req.stream.unwrap_or(false);
    let transfer = kv_transfer::plan(
        &st,
        req.kv_transfer_params.as_ref(),
        &prompt,
        st.cache_salt(&spec).as_deref(),
        (spec.n, stream),
    )
    .await?;
    let seqs = st.submit(&prompt, max_tokens, &spec, constraints, transfer.pins())?;
    let reasoning = st.reasoning.stream(opened);
    // A prefill for a decode server: its response names the pinned blocks.
    let produce = transfer.pins().then(|| seqs[0].id);
    let (id, created, model) = (random_id("chatcmpl"), now_s(), st.model_name(&spec));
    let usage = Arc::new(Mutex::new(Usage {
        prompt_tokens: prompt.len(),
        ..Usage::default()
    }));

    let usage_options =
        StreamOptions::usage(req.stream_options.as_ref(), st.config.force_include_usage);
    if let Some(plan) = plan {
        let reported = Reported {
            st: st.clone(),
            logprobs: logprobs.is_some(),
            as_ids,
            prompt: spec.prompt_logprobs.is_some(),
        };
        if stream {
            return Ok(stream_tools(
                plan,
                reasoning,
                seqs,
                (spec.n, usage, usage_options),
                reported,
                (id, created, model),
            ));
        }
        let ids = (id, created, model);
        let mut body = tools_reply(plan, reasoning, seqs, spec.n, usage, reported, ids).await?;
        if let Some(seq) = produce {
            body["kv_transfer_params"] = kv_transfer::produced(&st, seq).await;
        }
        return Ok(axum::Json(body).into_response());
    }
    if req.stream.unwrap_or(false) {
        let (include_usage, each) = usage_options;
        let prompt_len = prompt.len();
        let so_far = move |generated| each.then(|| running_usage(prompt_len, generated));
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
            .map(|i| chunk(json!([{"index": i, "delta": {"role": "assistant", "content": echo.clone().unwrap_or_default()}, "logprobs": null, "finish_reason": null}]), so_far(0)))
            .collect();
        let (st2, chunk2, usage2) = (st.clone(), chunk.clone(), usage.clone());
        let mut splits = vec![reasoning; seqs.len()];
        let usage3 = usage.clone();
        let body = choices(seqs, spec.n, usage.clone()).map(move |item| match item.result {
            Ok(d) => {
                let lp = if logprobs.is_some() { logprobs_json(&st2, &d.logprobs, as_ids) } else { Value::Null };
                let r = &mut splits[item.index];
                let split = r.push_tokens(&d.text, d.tokens, d.finish.is_some());
                if d.finish.is_some() {
                    usage3.lock().unwrap().reasoning_tokens += r.reasoning_tokens();
                }
                let delta = delta_json(split, d.finish.is_some());
                let mut c = chunk2(json!([{"index": item.index, "delta": delta, "logprobs": lp, "finish_reason": d.finish}]), so_far(item.generated));
                // The first choice's scored prompt, on its first chunk (as the whole reply
                // carries it).
                if item.index == 0 && !d.prompt_logprobs.is_empty() {
                    c["prompt_logprobs"] = prompt_logprobs_json(&st2, &d.prompt_logprobs);
                }
                c
            }
            Err(e) => e.body(),
        });
        let tail = stream::once(async move {
            include_usage.then(|| chunk(json!([]), Some(usage2.lock().unwrap().json())))
        })
        .filter_map(|x| async move { x });
        let log_id = id.clone();
        tracing::info!(id = %log_id, prompt_tokens = prompt.len(), n = spec.n, max_tokens, "chat completion (stream)");
        return Ok(sse(stream::iter(heads).chain(body).chain(tail)));
    }

    let collect = |s: Sequence| s.collect_split(reasoning.clone());
    let results = futures_util::future::join_all(seqs.into_iter().map(collect)).await;
    let mut out = Vec::new();
    let mut prompt_logprobs = Value::Null;
    for (index, r) in results.into_iter().enumerate() {
        let (seq, d, split, thought) = r?;
        if index == 0 && spec.prompt_logprobs.is_some() {
            prompt_logprobs = prompt_logprobs_json(&st, &d.prompt_logprobs);
        }
        usage.lock().unwrap().add(index / spec.n, &seq);
        let lp = if logprobs.is_some() {
            logprobs_json(&st, &d.logprobs, as_ids)
        } else {
            Value::Null
        };
        usage.lock().unwrap().reasoning_tokens += thought;
        let mut message = message_json(split);
        if let Some(e) = &echo {
            message["content"] = json!(format!("{e}{}", message["content"].as_str().unwrap_or("")));
        }
        out.push(json!({
            "index": index,
            "message": message,
            "logprobs": lp,
            "finish_reason": d.finish.unwrap_or("stop"),
        }));
    }
    let usage = usage.lock().unwrap().clone();
    tracing::info!(id = %id, prompt_tokens = usage.prompt_tokens, completion_tokens = usage.completion_tokens, cached_tokens = usage.cached.iter().sum::<usize>(), "chat completion");
    let mut body = json!({
        "id": id, "object": "chat.completion", "created": created, "model": model,
        "choices": out, "usage": usage.json(),
    });
    if !prompt_logprobs.is_null() {
        body["prompt_logprobs"] = prompt_logprobs;
    }
    if let Some(seq) = produce {
        body["kv_transfer_params"] = kv_transfer::produced(&st, seq).await;
    }
    Ok(axum::Json(body).into_response())
}

/// The matchers of a chat request (one per choice): its tools' grammar or the one it asks
/// for, each held after the reasoning a thinking model writes first; and whether the prompt
/// opened that reasoning.
pub fn chat_constraints(
    st: &Shared,
    req: &ChatRequest,
    plan: Option<&ToolPlan>,
    n: usize,
    prompt: &[u32],
) -> Result<(Vec<Constraint>, bool), ApiError> {
    let requested = requested_grammar(
        req.response_format.as_ref(),
        req.structured_outputs.as_ref(),
    )?;
    // A model that thinks does so before the grammar holds its answer.
    let opened = st.reasoning.opened_by_ids(&st.model.tokenizer, prompt);
    let (grammar, param) = match (plan, requested) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_param(
                "response_format",
                "response_format cannot be combined with tools unless tool_choice is none",
            ));
        }
        (Some(p), None) => (Some(p.grammar()), "tools"),
        (None, Some(g)) if req.response_format.is_some() => (Some(g), "response_format"),
        (None, g) => (g, "structured_outputs"),
    };
    let grammar = (st.reasoning).constrain(grammar, opened, thinking_budget(st, req)?);
    let constraints = match grammar {
        Some(g) => st.compile(&g, n, param)?,
        None => Vec::new(),
    };
    Ok((constraints, opened))
}

/// The request's reasoning budget where the model reasons (in `<think>` blocks or harmony's
/// `analysis` messages; a model that does not writes no reasoning, within any budget).
fn thinking_budget(st: &Shared, req: &ChatRequest) -> Result<Option<usize>, ApiError> {
    match req.thinking_token_budget {
        Some(n) if n < 0 => Err(ApiError::bad_param(
            "thinking_token_budget",
            "thinking_token_budget must be 0 or more",
        )),
        Some(n) if st.reasoning != ReasoningFormat::None => Ok(Some(n as usize)),
        _ => Ok(None),
    }
}

/// A streamed chunk's delta: reasoning and answer text, `content` also when there is
/// neither and the choice goes on (as every chunk carried before), nothing at its end.
fn delta_json(split: Split, finished: bool) -> Value {
    let mut delta = json!({});
    if !split.reasoning.is_empty() {
        delta["reasoning_content"] = json!(split.reasoning);
    }
    if !split.content.is_empty() || (split.reasoning.is_empty() && !finished) {
        delta["content"] = json!(split.content);
    }
    delta
}

/// A finished reply's message: its answer, and its reasoning where it has some.
/// vLLM's `echo`: the final message's text where it is the assistant's (the reply's content
/// then starts with it). Not served with tools.
fn echoed(req: &ChatRequest, tools: bool) -> Result<Option<String>, ApiError> {
    if req.echo != Some(true) {
        return Ok(None);
    }
    if tools {
        return Err(ApiError::bad_param(
            "echo",
            "echo is not served with tools (unless tool_choice is none)",
        ));
    }
    match req.messages.last() {
        Some(m) if m.role == "assistant" => crate::state::message_text(m),
        _ => Ok(None),
    }
}

/// A reply's message: its content, and its reasoning where it wrote some.
pub(super) fn message_json(split: Split) -> Value {
    let mut message = json!({"role": "assistant", "content": split.content});
    if !split.reasoning.is_empty() {
        message["reasoning_content"] = json!(split.reasoning);
    }
    message
}

/// `as_ids`: tokens named `token_id:{id}` (`return_tokens_as_token_ids`).
pub(super) fn logprobs_json(st: &Shared, lps: &[TokenLogprob], as_ids: bool) -> Value {
    let content: Vec<Value> = lps.iter().map(|l| logprob_entry(st, l, as_ids)).collect();
    json!({"content": content})
}
