//! `POST /v1/completions` (the legacy text API): string, strings, token ids or lists of them.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use serde_json::{Map, Value, json};

use super::{now_s, random_id, token_text};
use crate::api::CompletionRequest;
use crate::error::{ApiError, ApiJson};
use crate::generate::TokenLogprob;
use crate::kv_transfer;
use crate::sse::{Usage, choices, sse};
use crate::state::Shared;
use kiln_frontend::requested_grammar;

pub async fn completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let (spec, prompts) = super::render::checked_completion(&st, &req)?;
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
    let transfer = kv_transfer::plan(
        &st,
        req.kv_transfer_params.as_ref(),
        &prompts[0].0,
        spec.cache_salt.as_deref(),
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
    let (id, created, model) = (
        random_id("cmpl"),
        now_s(),
        st.config.served_model_name.clone(),
    );
    tracing::info!(id = %id, prompts = prompts.len(), prompt_tokens, n = spec.n, "completion");
    let logprobs = req.logprobs;
    // `echo`: each choice's text starts with its prompt's (choice `i` is of prompt `i / n`).
    let echo: Vec<String> = match req.echo {
        Some(true) => super::render::echo_texts(&st, &req.prompt)?,
        _ => Vec::new(),
    };
    let n = spec.n;

    if stream {
        let include_usage = req
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        let chunk = move |choices: Value, usage: Option<Value>| {
            let mut c = json!({"id": id, "object": "text_completion", "created": created, "model": model, "choices": choices});
            if let Some(u) = usage {
                c["usage"] = u;
            }
            c
        };
        let (st2, chunk2, usage2) = (st.clone(), chunk.clone(), usage.clone());
        let mut offsets = vec![0usize; seqs.len()];
        // The prompt goes out with each choice's first chunk.
        let mut echoed = vec![echo.is_empty(); seqs.len()];
        let body = choices(seqs, spec.n, usage).map(move |item| match item.result {
            Ok(d) => {
                let lp = logprobs.map_or(Value::Null, |_| logprobs_json(&st2, &d.logprobs, &mut offsets[item.index]));
                let mut text = d.text;
                if !std::mem::replace(&mut echoed[item.index], true) {
                    text.insert_str(0, &echo[item.index / n]);
                }
                chunk2(json!([{"index": item.index, "text": text, "logprobs": lp, "finish_reason": d.finish}]), None)
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
        let lp = logprobs.map_or(Value::Null, |_| logprobs_json(&st, &d.logprobs, &mut 0));
        let text = match echo.get(index / n) {
            Some(prompt) => format!("{prompt}{}", d.text),
            None => d.text,
        };
        out.push(json!({"index": index, "text": text, "logprobs": lp, "finish_reason": d.finish.unwrap_or("stop")}));
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

/// The legacy logprobs object; `offset` is the text offset of the first token (advanced).
fn logprobs_json(st: &Shared, lps: &[TokenLogprob], offset: &mut usize) -> Value {
    let tok = &st.model.tokenizer;
    let (mut tokens, mut token_logprobs, mut top, mut text_offset) =
        (vec![], vec![], vec![], vec![]);
    for l in lps {
        let t = token_text(tok, l.id);
        text_offset.push(*offset);
        *offset += t.len();
        tokens.push(t);
        token_logprobs.push(l.logprob);
        let m: Map<String, Value> = l
            .top
            .iter()
            .map(|&(id, lp)| (token_text(tok, id), json!(lp)))
            .collect();
        top.push(Value::Object(m));
    }
    json!({"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": text_offset})
}
