//! The prompt token ids a generation body turns into, shared by the generation handlers and
//! the render endpoints that the inference gateway's precise prefix routing calls:
//! `POST /v1/completions/render` answers `[{"token_ids": [...]}]` (one per prompt) and
//! `POST /v1/chat/completions/render` answers `{"token_ids": [...]}`: exactly the ids the
//! server would prefill for the same body (chat template applied), after the same checks.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api::{ChatRequest, CompletionRequest, PromptInput, reject_unknown};
use crate::error::{ApiError, ApiJson};
use crate::state::{AppState, Shared};
use kiln_frontend::GenSpec;
use kiln_frontend::tools::ToolPlan;

/// The prompts of a completions body, tokenized (text prompts get the special tokens).
pub fn completion_prompts(st: &AppState, prompt: &PromptInput) -> Result<Vec<Vec<u32>>, ApiError> {
    prompt_ids(st, prompt, "prompt")
}

/// Texts or token ids as token ids (texts with the special tokens); errors name `param`.
pub fn prompt_ids(
    st: &AppState,
    prompt: &PromptInput,
    param: &str,
) -> Result<Vec<Vec<u32>>, ApiError> {
    let encode = |s: &str| Ok::<_, ApiError>(st.model.encode(s, true, param)?);
    let prompts: Vec<Vec<u32>> = match prompt {
        PromptInput::Text(s) => vec![encode(s)?],
        PromptInput::Texts(v) => v.iter().map(|s| encode(s)).collect::<Result<_, _>>()?,
        PromptInput::Tokens(t) => vec![t.clone()],
        PromptInput::TokenLists(v) => v.clone(),
    };
    if prompts.is_empty() {
        return Err(ApiError::bad_param(
            param,
            format!("the {param} list is empty"),
        ));
    }
    Ok(prompts)
}

/// The text `echo` puts before each prompt's completions: a text prompt as sent, token ids
/// decoded (special tokens kept).
pub fn echo_texts(st: &AppState, prompt: &PromptInput) -> Result<Vec<String>, ApiError> {
    let decode = |ids: &[u32]| {
        (st.model.tokenizer.decode(ids, false))
            .map_err(|e| ApiError::bad_param("prompt", e.to_string()))
    };
    match prompt {
        PromptInput::Text(s) => Ok(vec![s.clone()]),
        PromptInput::Texts(v) => Ok(v.clone()),
        PromptInput::Tokens(t) => Ok(vec![decode(t)?]),
        PromptInput::TokenLists(v) => v.iter().map(|t| decode(t)).collect(),
    }
}

/// Chat template variables that a request's own fields set, which `chat_template_kwargs`
/// (and the server's defaults for it) may not.
pub const TEMPLATE_REQUEST_FIELDS: [&str; 4] =
    ["messages", "tools", "documents", "add_generation_prompt"];

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
        st.model.tool_format,
    )?
    .filter(ToolPlan::active);
    if let Some(k) = &req.chat_template_kwargs
        && let Some(fixed) = TEMPLATE_REQUEST_FIELDS
            .into_iter()
            .find(|f| k.contains_key(*f))
    {
        return Err(ApiError::bad_param(
            "chat_template_kwargs",
            format!("chat_template_kwargs cannot set `{fixed}`; the request's own field does"),
        ));
    }
    let kwargs = template_kwargs(st, req)?;
    let text = st.render_chat_with(&req.messages, plan.as_ref(), kwargs.as_ref(), req.ending()?)?;
    let prompt = st.model.encode(&text, false, "messages")?;
    Ok((plan, prompt))
}

/// The template's further variables: the server's defaults, the request's
/// `chat_template_kwargs` over them, and its `reasoning_effort` for a template that reads one.
fn template_kwargs(
    st: &AppState,
    req: &ChatRequest,
) -> Result<Option<Map<String, Value>>, ApiError> {
    let mut kwargs = st.config.default_chat_template_kwargs.clone();
    kwargs.extend(req.chat_template_kwargs.clone().unwrap_or_default());
    let Some(effort) = &req.reasoning_effort else {
        return Ok((!kwargs.is_empty()).then_some(kwargs));
    };
    let bad = |m: String| ApiError::bad_param("reasoning_effort", m);
    const EFFORTS: [&str; 5] = ["none", "minimal", "low", "medium", "high"];
    if !EFFORTS.contains(&effort.as_str()) {
        return Err(bad(format!(
            "reasoning_effort `{effort}` is not one of {}",
            EFFORTS.join(", ")
        )));
    }
    if !(st.model.chat_template.as_ref()).is_some_and(|t| t.reads("reasoning_effort")) {
        return Err(bad(
            "the model's chat template does not read reasoning_effort, so it would change nothing"
                .into(),
        ));
    }
    if (req.chat_template_kwargs.as_ref()).is_some_and(|k| k.contains_key("reasoning_effort")) {
        return Err(bad(
            "reasoning_effort is also set in chat_template_kwargs: set it once".into(),
        ));
    }
    kwargs.insert("reasoning_effort".into(), json!(effort));
    Ok(Some(kwargs))
}

/// A prompt's token ids and the number of tokens it may generate.
pub type CheckedPrompt = (Vec<u32>, usize);

/// Legacy default for a completion's `max_tokens`.
const DEFAULT_COMPLETION_TOKENS: usize = 16;

/// A completions body after every check the generation endpoint makes: its spec and each
/// prompt with the tokens it may generate.
pub fn checked_completion(
    st: &AppState,
    req: &CompletionRequest,
) -> Result<(GenSpec, Vec<CheckedPrompt>), ApiError> {
    let lora = st.check_model(req.model.as_deref())?;
    reject_unknown(&req.extra)?;
    // `echo` with `logprobs` reports the prompt's tokens too: the prompt is scored.
    let mut params = req.sampling.clone();
    if let (Some(true), Some(n)) = (req.echo, req.logprobs) {
        params.prompt_logprobs = Some(params.prompt_logprobs.unwrap_or(0).max(n.into()));
    }
    let spec = GenSpec {
        lora,
        ..st.gen_spec(&params, params.max_tokens, req.logprobs)?
    };
    let prompts = completion_prompts(st, &req.prompt)?;
    if prompts.len() * spec.n > 64 {
        return Err(ApiError::bad_param("n", "at most 64 sequences per request"));
    }
    let checked = prompts
        .into_iter()
        .map(|mut p| {
            spec.truncate(&mut p);
            let m = st.check_prompt(&p, spec.max_tokens, Some(DEFAULT_COMPLETION_TOKENS))?;
            Ok((p, m))
        })
        .collect::<Result<_, ApiError>>()?;
    Ok((spec, checked))
}

/// A chat body after every check the generation endpoint makes: its spec, tool plan, prompt
/// and the tokens it may generate.
pub fn checked_chat(
    st: &AppState,
    req: &ChatRequest,
) -> Result<(GenSpec, Option<ToolPlan>, Vec<u32>, usize), ApiError> {
    let lora = st.check_model(req.model.as_deref())?;
    reject_unknown(&req.extra)?;
    let logprobs = kiln_frontend::chat_logprobs(req.logprobs, req.top_logprobs)?;
    let mut spec = st.gen_spec(
        &req.sampling,
        req.max_completion_tokens.or(req.sampling.max_tokens),
        logprobs,
    )?;
    spec.lora = lora;
    let (plan, mut prompt) = chat_prompt(st, req)?;
    spec.truncate(&mut prompt);
    // Calls in a format marked by special tokens are read from text that keeps them.
    if plan
        .as_ref()
        .is_some_and(|p| p.format.keeps_special_tokens())
    {
        spec.skip_special_tokens = false;
    }
    let max_tokens = st.check_prompt(&prompt, spec.max_tokens, None)?;
    Ok((spec, plan, prompt, max_tokens))
}

pub async fn render_completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let (_, prompts) = checked_completion(&st, &req)?;
    let out: Vec<_> = prompts
        .into_iter()
        .map(|(p, _)| json!({"token_ids": p}))
        .collect();
    Ok(axum::Json(out).into_response())
}

pub async fn render_chat(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    let (_, _, prompt, _) = checked_chat(&st, &req)?;
    Ok(axum::Json(json!({"token_ids": prompt})).into_response())
}
