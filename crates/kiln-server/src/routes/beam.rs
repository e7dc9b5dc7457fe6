//! `use_beam_search` on `/v1/completions` and `/v1/chat/completions` (`beam_search.rs` runs
//! it): each prompt's `n` best beams as its choices, whole (no stream), with usage.

use axum::response::{IntoResponse, Response};
use kiln_frontend::GenSpec;
use serde_json::{Value, json};

use super::{now_s, random_id};
use crate::api::{ChatRequest, CompletionRequest};
use crate::beam_search::{Beam, BeamSearch};
use crate::error::ApiError;
use crate::sse::Usage;
use crate::state::Shared;

/// The beam search a completion request asks for.
pub fn completion_search(req: &CompletionRequest) -> Result<Option<BeamSearch>, ApiError> {
    let others = [
        ("stream", req.stream == Some(true)),
        ("logprobs", req.logprobs.is_some()),
        ("echo", req.echo == Some(true)),
        ("response_format", req.response_format.is_some()),
        ("structured_outputs", req.structured_outputs.is_some()),
        ("kv_transfer_params", req.kv_transfer_params.is_some()),
    ];
    BeamSearch::requested(&req.beam, &req.sampling, &others)
}

/// The beam search a chat request asks for.
pub fn chat_search(req: &ChatRequest) -> Result<Option<BeamSearch>, ApiError> {
    let logprobs = req.logprobs == Some(true) || req.top_logprobs.is_some();
    let others = [
        ("stream", req.stream == Some(true)),
        ("logprobs", logprobs),
        ("echo", req.echo == Some(true)),
        ("response_format", req.response_format.is_some()),
        ("structured_outputs", req.structured_outputs.is_some()),
        ("tools", req.tools.is_some()),
        ("thinking_token_budget", req.thinking_token_budget.is_some()),
        ("kv_transfer_params", req.kv_transfer_params.is_some()),
    ];
    BeamSearch::requested(&req.beam, &req.sampling, &others)
}

/// A beam's text: its tokens decoded, EOS left out unless the request keeps stop strings.
fn text(st: &Shared, spec: &GenSpec, beam: &Beam) -> Result<String, ApiError> {
    let keep = beam.tokens.len() - (beam.done && !spec.include_stop_str) as usize;
    (st.model
        .tokenizer
        .decode(&beam.tokens[..keep], spec.skip_special_tokens))
    .map_err(|e| ApiError::internal(e.to_string()))
}

fn finish(beam: &Beam) -> &'static str {
    if beam.done { "stop" } else { "length" }
}

fn usage(prompt_tokens: usize, beams: &[Beam]) -> Value {
    Usage {
        prompt_tokens,
        completion_tokens: beams.iter().map(|b| b.tokens.len()).sum(),
        ..Usage::default()
    }
    .json()
}

/// Each prompt's beams as a completion's choices (choice `i` of prompt `i / n`).
pub async fn completions(
    st: &Shared,
    search: BeamSearch,
    spec: &GenSpec,
    prompts: &[(Vec<u32>, usize)],
) -> Result<Response, ApiError> {
    let (mut choices, mut beams) = (Vec::new(), Vec::new());
    for (p, max_tokens) in prompts {
        for b in search.run(st, p, *max_tokens, spec).await? {
            let index = choices.len();
            choices.push(
                json!({"index": index, "text": text(st, spec, &b)?, "logprobs": null,
                "finish_reason": finish(&b), "cumulative_logprob": b.logprob}),
            );
            beams.push(b);
        }
    }
    let prompt_tokens = prompts.iter().map(|(p, _)| p.len()).sum();
    Ok(axum::Json(json!({
        "id": random_id("cmpl"), "object": "text_completion", "created": now_s(),
        "model": st.model_name(spec), "choices": choices, "usage": usage(prompt_tokens, &beams),
    }))
    .into_response())
}

/// The beams of a chat's reply as its choices, reasoning set apart where the model writes it.
pub async fn chat(
    st: &Shared,
    search: BeamSearch,
    spec: &GenSpec,
    prompt: &[u32],
    max_tokens: usize,
) -> Result<Response, ApiError> {
    let beams = search.run(st, prompt, max_tokens, spec).await?;
    let opened = st.reasoning.opened_by_ids(&st.model.tokenizer, prompt);
    let mut choices = Vec::new();
    for (index, b) in beams.iter().enumerate() {
        let split = st.reasoning.stream(opened).push(&text(st, spec, b)?, true);
        let message = super::chat::message_json(split);
        choices.push(json!({"index": index, "message": message, "logprobs": null,
            "finish_reason": finish(b), "cumulative_logprob": b.logprob}));
    }
    Ok(axum::Json(json!({
        "id": random_id("chatcmpl"), "object": "chat.completion", "created": now_s(),
        "model": st.model_name(spec), "choices": choices, "usage": usage(prompt.len(), &beams),
    }))
    .into_response())
}
