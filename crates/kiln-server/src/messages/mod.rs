//! Anthropic's Messages API, which coding agents built for Claude speak: `POST /v1/messages`
//! (whole or streamed as typed events) and `POST /v1/messages/count_tokens`.
//!
//! A request is served as the chat request it amounts to (`request.rs`): the same template,
//! tools, grammars and reasoning split as `/v1/chat/completions`; the reply, read by the
//! same reader as the Responses API's (`reply.rs`), is written as content blocks
//! (`writer.rs`): `thinking`, `text`, `tool_use`. Errors take Anthropic's shape
//! (`{"type": "error", "error": {"type", "message"}}`).

mod request;
mod writer;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiJson};
use crate::responses::random_id;
use crate::routes::chat::chat_constraints;
use crate::routes::render::checked_chat;
use crate::sse::{Usage, choices};
use crate::state::Shared;
use kiln_frontend::ReplyReader;
use request::MessagesRequest;
use writer::Writer;

/// An error in Anthropic's shape, with the status it had.
pub struct MessagesError(ApiError);

impl From<ApiError> for MessagesError {
    fn from(e: ApiError) -> Self {
        MessagesError(e)
    }
}

impl IntoResponse for MessagesError {
    fn into_response(self) -> Response {
        (self.0.status, axum::Json(error_body(&self.0))).into_response()
    }
}

/// `{"type": "error", "error": {"type", "message"}}`, the type named by the status.
pub fn error_body(e: &ApiError) -> Value {
    let kind = match e.status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::SERVICE_UNAVAILABLE => "overloaded_error",
        s if s.is_server_error() => "api_error",
        _ => "invalid_request_error",
    };
    let message = match &e.param {
        Some(p) => format!("{p}: {}", e.message),
        None => e.message.clone(),
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

type Body = Result<ApiJson<MessagesRequest>, ApiError>;

pub async fn create(State(st): State<Shared>, body: Body) -> Result<Response, MessagesError> {
    let ApiJson(req) = body?;
    let Some(max_tokens) = req.max_tokens else {
        return Err(ApiError::bad_param("max_tokens", "max_tokens is required").into());
    };
    let chat = req.to_chat(max_tokens)?;
    let (spec, plan, prompt, max_tokens) = checked_chat(&st, &chat)?;
    let (constraints, opened) = chat_constraints(&st, &chat, plan.as_ref(), 1, &prompt)?;
    let seqs = st.submit(&prompt, max_tokens, &spec, constraints, false)?;
    let id = random_id("msg");
    tracing::info!(id = %id, prompt_tokens = prompt.len(), max_tokens, stream = chat.stream.unwrap_or(false), "message");
    let head = json!({
        "id": id, "type": "message", "role": "assistant", "model": st.model_name(&spec),
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": prompt.len(), "output_tokens": 0},
    });
    let usage = Arc::new(Mutex::new(Usage {
        prompt_tokens: prompt.len(),
        ..Usage::default()
    }));
    let mut reply = ReplyReader::new(st.reasoning.stream(opened), plan.as_ref());
    let mut writer = Writer::new(head);
    let start = writer.take_events();
    let counts = usage.clone();
    let on = move |item: crate::sse::ChoiceItem| -> (Vec<Value>, Option<Value>) {
        let d = match item.result {
            Ok(d) => d,
            Err(e) => {
                writer.fail(&e);
                return (writer.take_events(), None);
            }
        };
        for piece in reply.push(&d.text, d.tokens, d.finish) {
            writer.push(piece);
        }
        let Some(finish) = d.finish else {
            return (writer.take_events(), None);
        };
        let stop_reason = match (finish, &d.stop_string) {
            ("length", _) => "max_tokens",
            (_, Some(_)) => "stop_sequence",
            _ if reply.called() => "tool_use",
            _ => "end_turn",
        };
        let u = counts.lock().unwrap().clone();
        let cached = u.cached.iter().sum::<usize>();
        let usage = json!({
            "input_tokens": u.prompt_tokens - cached, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0, "output_tokens": u.completion_tokens,
        });
        let message = writer.finish(stop_reason, d.stop_string, usage);
        (writer.take_events(), Some(message))
    };
    let items = choices(seqs, 1, usage);
    Ok(crate::sse::respond(items, chat.stream.unwrap_or(false), start, on).await?)
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens, as the request would be served.
pub async fn count_tokens(State(st): State<Shared>, body: Body) -> Result<Response, MessagesError> {
    let ApiJson(req) = body?;
    let chat = req.to_chat(1)?;
    let (_, _, prompt, _) = checked_chat(&st, &chat)?;
    Ok(axum::Json(json!({"input_tokens": prompt.len()})).into_response())
}
