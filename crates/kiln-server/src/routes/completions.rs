//! `POST /v1/completions` (the legacy text API): string, strings, token ids or lists of them.
//! With `echo` and `logprobs` the logprobs object covers the prompt's tokens as well (the
//! first with `null`, as it has no context); vLLM's `prompt_logprobs` adds each choice's
//! `prompt_logprobs` list.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use serde_json::{Map, Value, json};

use super::{now_s, prompt_logprobs_json, random_id, token_name, token_text};
use crate::api::{CompletionRequest, StreamOptions};
use crate::error::{ApiError, ApiJson};
use crate::generate::Delta;
use crate::kv_transfer;
use crate::sse::{Usage, choices, running_usage, sse};
use crate::state::Shared;
use kiln_frontend::requested_grammar;

pub async fn completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let (spec, prompts) = super::render::checked_completion(&st, &req)?;
    if let Some(search) = super::beam::completion_search(&req)? {
        return super::beam::completions(&st, search, &spec, &prompts).await;
    }
    let grammar = requested_grammar(
        req.response_format.as_ref(),
        req.structured_outputs.as_ref(),
    )?;
    let param = if req.response_format.is_some() {
        "response_format"
    } else {
        "structured_outputs"
    };
    let stream = req.stream.unwrap_or(false);
    let as_ids = (req.return_tokens_as_token_ids).unwrap_or(st.config.return_tokens_as_token_ids);
    let transfer = kv_transfer::plan(
        &st,
        req.kv_transfer_params.as_ref(),
        &prompts[0].0,
        st.cache_salt(&spec).as_deref(),
        (prompts.len() * spec.n, stream),
    )
    .await?;
    let mut seqs = Vec::new();
    for (p, m) in &prompts {
        let constraints = match &grammar {
            Some(g) => st.compile(g, spec.n, param)?,
            None => Vec::new(),
        };
        seqs.extend(st.submit(p, *m, &spec, constraints, transfer.pins())?);
    }
    // A prefill for a decode server: its response names the pinned blocks.
    let produce = transfer.pins().then(|| seqs[0].id);
    let prompt_tokens = prompts.iter().map(|(p, _)| p.len()).sum();
    let usage = Arc::new(Mutex::new(Usage {
        prompt_tokens,
        ..Usage::default()
    }));
    let (id, created, model) = (random_id("cmpl"), now_s(), st.model_name(&spec));
    tracing::info!(id = %id, prompts = prompts.len(), prompt_tokens, n = spec.n, "completion");
    let logprobs = req.logprobs;
    // `echo`: each choice's text starts with its prompt's (choice `i` is of prompt `i / n`).
    let echo: Vec<String> = match req.echo {
        Some(true) => super::render::echo_texts(&st, &req.prompt)?,
        _ => Vec::new(),
    };
    let n = spec.n;
    // Each prompt's first token, which the scored ones follow.
    let firsts: Vec<u32> = prompts.iter().map(|(p, _)| p[0]).collect();
    let prompt_part = Scored {
        echo: !echo.is_empty() && logprobs.is_some(),
        vllm: req.sampling.prompt_logprobs.is_some(),
    };

    if stream {
        let (include_usage, each) =
            StreamOptions::usage(req.stream_options.as_ref(), st.config.force_include_usage);
        let prompt_lens: Vec<usize> = prompts.iter().map(|(p, _)| p.len()).collect();
        let chunk = move |choices: Value, usage: Option<Value>| {
            let mut c = json!({"id": id, "object": "text_completion", "created": created, "model": model, "choices": choices});
            if let Some(u) = usage {
                c["usage"] = u;
            }
            c
        };
        let (st2, chunk2, usage2) = (st.clone(), chunk.clone(), usage.clone());
        let mut offsets = vec![0usize; seqs.len()];
        let mut started = vec![false; seqs.len()];
        let body = choices(seqs, spec.n, usage).map(move |item| match item.result {
            Ok(d) => {
                // The prompt's part goes out with each choice's first chunk.
                let first = !std::mem::replace(&mut started[item.index], true);
                let prompt_first = first.then_some(firsts[item.index / n]);
                let lp = logprobs.map_or(Value::Null, |_| {
                    let e = entries(prompt_part.echo.then_some(prompt_first).flatten(), &d);
                    logprobs_json(&st2, &e, &mut offsets[item.index], as_ids)
                });
                let mut text = d.text;
                if first && !echo.is_empty() {
                    text.insert_str(0, &echo[item.index / n]);
                }
                let mut c = json!({"index": item.index, "text": text, "logprobs": lp, "finish_reason": d.finish});
                if first && prompt_part.vllm {
                    c["prompt_logprobs"] = prompt_logprobs_json(&st2, &d.prompt_logprobs);
                }
                let so_far = running_usage(prompt_lens[item.index / n], item.generated);
                chunk2(json!([c]), each.then_some(so_far))
            }
            Err(e) => e.body(),
        });
        let tail = stream::once(async move {
            include_usage.then(|| chunk(json!([]), Some(usage2.lock().unwrap().json())))
        })
        .filter_map(|x| async move { x });
        return Ok(sse(body.chain(tail)));
    }

    let results = futures_util::future::join_all(seqs.into_iter().map(|s| s.collect())).await;
    let mut out = Vec::new();
    for (index, r) in results.into_iter().enumerate() {
        let (seq, d) = r?;
        usage.lock().unwrap().add(index / spec.n, &seq);
        let first = firsts[index / n];
        let lp = logprobs.map_or(Value::Null, |_| {
            logprobs_json(
                &st,
                &entries(prompt_part.echo.then_some(first), &d),
                &mut 0,
                as_ids,
            )
        });
        let text = match echo.get(index / n) {
            Some(prompt) => format!("{prompt}{}", d.text),
            None => d.text,
        };
        let mut c = json!({"index": index, "text": text, "logprobs": lp, "finish_reason": d.finish.unwrap_or("stop")});
        if prompt_part.vllm {
            c["prompt_logprobs"] = prompt_logprobs_json(&st, &d.prompt_logprobs);
        }
        out.push(c);
    }
    let usage = usage.lock().unwrap().json();
    let mut body = json!({
        "id": id, "object": "text_completion", "created": created, "model": model,
        "choices": out, "usage": usage,
    });
    if let Some(seq) = produce {
        body["kv_transfer_params"] = kv_transfer::produced(&st, seq).await;
    }
    Ok(axum::Json(body).into_response())
}

/// Where a choice's scored prompt goes: into the legacy logprobs object (`echo` with
/// `logprobs`), into vLLM's `prompt_logprobs` list, or both.
#[derive(Clone, Copy)]
struct Scored {
    echo: bool,
    vllm: bool,
}

/// A token of the legacy logprobs object; `logprob` is `None` for the prompt's first token.
struct Entry<'a> {
    id: u32,
    logprob: Option<f32>,
    top: &'a [(u32, f32)],
}

/// A delta's tokens for the legacy logprobs object: with `prompt_first`, the prompt's (its
/// first token, then the scored ones) before the generated ones.
fn entries(prompt_first: Option<u32>, d: &Delta) -> Vec<Entry<'_>> {
    let first = prompt_first.map(|id| Entry {
        id,
        logprob: None,
        top: &[],
    });
    let scored = prompt_first.map_or(&[][..], |_| &d.prompt_logprobs[..]);
    let tokens = (scored.iter().chain(&d.logprobs)).map(|l| Entry {
        id: l.id,
        logprob: Some(l.logprob),
        top: &l.top,
    });
    first.into_iter().chain(tokens).collect()
}

/// The legacy logprobs object; `offset` is the text offset of the first token (advanced).
/// `as_ids`: tokens named `token_id:{id}` (`return_tokens_as_token_ids`).
fn logprobs_json(st: &Shared, entries: &[Entry], offset: &mut usize, as_ids: bool) -> Value {
    let tok = &st.model.tokenizer;
    let (mut tokens, mut token_logprobs, mut top, mut text_offset) =
        (vec![], vec![], vec![], vec![]);
    for e in entries {
        text_offset.push(*offset);
        *offset += token_text(tok, e.id).len();
        tokens.push(token_name(tok, e.id, as_ids));
        token_logprobs.push(json!(e.logprob));
        top.push(e.logprob.map_or(Value::Null, |_| {
            let m: Map<String, Value> = (e.top.iter())
                .map(|&(id, lp)| (token_name(tok, id, as_ids), json!(lp)))
                .collect();
            Value::Object(m)
        }));
    }
    json!({"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": text_offset})
}
