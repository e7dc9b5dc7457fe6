//! The prompt token ids a generation body turns into, shared by the generation handlers and
//! the render endpoints that the inference gateway's precise prefix routing calls:
//! `POST /v1/completions/render` answers `[{"token_ids": [...]}]` (one per prompt) and
//! `POST /v1/chat/completions/render` answers `{"token_ids": [...]}`: exactly the ids the
//! server would prefill for the same body (chat template applied), after the same checks.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::api::{ChatRequest, CompletionRequest, PromptInput, reject_unknown};
use crate::error::{ApiError, ApiJson};
use crate::state::{AppState, Shared};
use crate::tools::ToolPlan;

/// The prompts of a completions body, tokenized (text prompts get the special tokens).
pub fn completion_prompts(st: &AppState, prompt: &PromptInput) -> Result<Vec<Vec<u32>>, ApiError> {
    let tok = &st.model.tokenizer;
    let encode = |s: &str| {
        tok.encode(s, true)
            .map_err(|e| ApiError::bad_param("prompt", e.to_string()))
    };
    let prompts: Vec<Vec<u32>> = match prompt {
        PromptInput::Text(s) => vec![encode(s)?],
        PromptInput::Texts(v) => v.iter().map(|s| encode(s)).collect::<Result<_, _>>()?,
        PromptInput::Tokens(t) => vec![t.clone()],
        PromptInput::TokenLists(v) => v.clone(),
    };
    if prompts.is_empty() {
        return Err(ApiError::bad_param("prompt", "the prompt list is empty"));
    }
    Ok(prompts)
}

/// A chat body's tool plan (when its tools are active) and prompt: the chat template rendered
/// with the tools' system prompt, then tokenized as is.
pub fn chat_prompt(
    st: &AppState,
    req: &ChatRequest,
) -> Result<(Option<ToolPlan>, Vec<u32>), ApiError> {
    let plan = ToolPlan::parse(
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.parallel_tool_calls,
    )?
    .filter(ToolPlan::active);
    let text = st.render_chat_with(
        &req.messages,
        plan.as_ref().map(ToolPlan::system_prompt).as_deref(),
    )?;
    let prompt = st
        .model
        .tokenizer
        .encode(&text, false)
        .map_err(|e| ApiError::bad_param("messages", e.to_string()))?;
    Ok((plan, prompt))
}

pub async fn render_completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    st.check_model(req.model.as_deref())?;
    reject_unknown(&req.extra)?;
    if req.echo.unwrap_or(false) {
        return Err(ApiError::bad_param("echo", "echo is not supported"));
    }
    let spec = st.gen_spec(&req.sampling, req.sampling.max_tokens, req.logprobs)?;
    let prompts = completion_prompts(&st, &req.prompt)?;
    for p in &prompts {
        st.check_prompt(p, spec.max_tokens, Some(1))?;
    }
    let out: Vec<_> = prompts
        .into_iter()
        .map(|p| json!({"token_ids": p}))
        .collect();
    Ok(axum::Json(out).into_response())
}

pub async fn render_chat(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    st.check_model(req.model.as_deref())?;
    reject_unknown(&req.extra)?;
    let spec = st.gen_spec(
        &req.sampling,
        req.max_completion_tokens.or(req.sampling.max_tokens),
        None,
    )?;
    let (_, prompt) = chat_prompt(&st, &req)?;
    st.check_prompt(&prompt, spec.max_tokens, None)?;
    Ok(axum::Json(json!({"token_ids": prompt})).into_response())
}
