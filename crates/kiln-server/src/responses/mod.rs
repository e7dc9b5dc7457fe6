//! OpenAI's Responses API, the one agent frameworks speak: `POST /v1/responses` (whole or
//! streamed as typed events, or in the background), `GET` and `DELETE /v1/responses/{id}`,
//! `POST /v1/responses/{id}/cancel`, and `GET /v1/responses/{id}/input_items`.
//!
//! A request is served as the chat request it amounts to (`request.rs`, `items.rs`): the
//! same template, tools, grammars and reasoning split as `/v1/chat/completions`. What comes
//! back is written as output items (`writer.rs`): reasoning, the answer's text, function
//! calls. A stored response (`store.rs`) is continued by `previous_response_id`: the server
//! renders the whole conversation again, and the prefix cache finds what it already holds.
//! A background response (`background.rs`) runs in a task of its own, followed through the
//! store.

mod background;
mod by_id;
mod items;
mod request;
mod store;
mod writer;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub use by_id::{cancel, delete, get, input_items};
pub use request::ResponsesRequest;
pub use store::ResponseStore;

use crate::error::{ApiError, ApiJson};
use crate::routes::chat::chat_constraints;
use crate::routes::render::checked_chat;
use crate::routes::{logprob_entry, now_s};
use crate::sse::{ChoiceItem, Usage, choices, sse_typed};
use crate::state::Shared;
use background::Background;
use kiln_frontend::ReplyReader;
use request::renamed;
use store::Stored;
use writer::Writer;

/// An id as OpenAI and Anthropic write them (`resp_…`, `msg_…`).
pub fn random_id(prefix: &str) -> String {
    format!(
        "{prefix}_{:016x}{:08x}",
        rand::random::<u64>(),
        rand::random::<u32>()
    )
}

pub async fn create(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<ResponsesRequest>,
) -> Result<Response, ApiError> {
    req.check()?;
    let previous = match &req.previous_response_id {
        Some(id) => Some(st.responses.get(id).ok_or_else(|| {
            if let Some(bg) = st.responses.background(id) {
                let status = bg.response()["status"].clone();
                let why = match bg.ended() {
                    true => format!("ended {status} and cannot be continued"),
                    false => "is still in progress: wait for it to end".into(),
                };
                return ApiError::bad_param(
                    "previous_response_id",
                    format!("Previous response `{id}` {why}"),
                );
            }
            let mut e = ApiError::not_found(format!("Previous response with id `{id}` not found."));
            (e.param, e.code) = (
                Some("previous_response_id".into()),
                Some("previous_response_not_found"),
            );
            e
        })?),
        None => None,
    };
    let background = req.background == Some(true);
    let store = match req.store {
        Some(true) if !st.responses.enabled() => {
            return Err(ApiError::bad_param(
                "store",
                "this server keeps no responses (--responses-store 0); send store: false",
            ));
        }
        Some(false) if background => {
            return Err(ApiError::bad_param(
                "store",
                "background responses are stored (polled and cancelled by id); send store: true",
            ));
        }
        _ if background && !st.responses.enabled() => {
            return Err(ApiError::bad_param(
                "background",
                "this server keeps no responses (--responses-store 0), so none runs in the background",
            ));
        }
        s => s.unwrap_or(true) && st.responses.enabled(),
    };
    let history = previous
        .as_ref()
        .map(|p| p.conversation())
        .unwrap_or_default();
    let chat = req.to_chat(&history).map_err(renamed)?;
    let (spec, plan, prompt, max_tokens) = checked_chat(&st, &chat).map_err(renamed)?;
    let (constraints, opened) =
        chat_constraints(&st, &chat, plan.as_ref(), 1, &prompt).map_err(renamed)?;
    let seqs = st.submit(&prompt, max_tokens, &spec, constraints, false)?;
    let id = random_id("resp");
    let streamed = chat.stream.unwrap_or(false);
    tracing::info!(id = %id, prompt_tokens = prompt.len(), max_tokens, stream = streamed, background, "response");
    let head = json!({
        "id": id, "object": "response", "created_at": now_s(), "model": st.model_name(&spec),
        "status": if background { "queued" } else { "in_progress" }, "background": background, "error": null, "incomplete_details": null,
        "instructions": req.instructions, "max_output_tokens": req.max_output_tokens,
        "previous_response_id": req.previous_response_id,
        "parallel_tool_calls": req.parallel_tool_calls.unwrap_or(true),
        "temperature": spec.sampling.temperature, "top_p": spec.sampling.top_p,
        "tools": req.tools.clone().unwrap_or_default(),
        "tool_choice": req.tool_choice.clone().unwrap_or(json!("auto")),
        "text": {"format": req.text.as_ref().and_then(|t| t.get("format").cloned()).unwrap_or(json!({"type": "text"}))},
        "reasoning": {"effort": chat.reasoning_effort, "summary": null}, "truncation": "disabled",
        "store": store, "metadata": req.metadata.clone().unwrap_or(json!({})),
        "output": [], "usage": null,
    });
    let usage = Arc::new(Mutex::new(Usage {
        prompt_tokens: prompt.len(),
        ..Usage::default()
    }));
    let input: Vec<Value> = (req.input_items().into_iter()).map(items::stored).collect();
    let mut turn = Turn {
        st: st.clone(),
        writer: Writer::new(head.clone()),
        reply: ReplyReader::new(st.reasoning.stream(opened), plan.as_ref()),
        usage: usage.clone(),
        store: store.then(|| (id.clone(), previous.clone(), input.clone())),
    };
    let items = choices(seqs, 1, usage);
    let events = turn.writer.take_events();
    if background {
        let bg = Background::start(turn, items, head.clone(), events, previous, input);
        st.responses.start(id, bg.clone());
        return Ok(match streamed {
            true => sse_typed(bg.follow(None)),
            false => axum::Json(head).into_response(),
        });
    }
    crate::sse::respond(items, streamed, events, move |item| turn.on(item)).await
}

/// One response being written.
struct Turn {
    st: Shared,
    writer: Writer,
    reply: ReplyReader,
    usage: Arc<Mutex<Usage>>,
    /// Where a stored response goes: its id, the response it continues, its input items.
    store: Option<(String, Option<Arc<Stored>>, Vec<Value>)>,
}

impl Turn {
    /// Takes the reply's next delta; returns the events it makes and, on the last, the
    /// finished response (stored where asked).
    fn on(&mut self, item: ChoiceItem) -> (Vec<Value>, Option<Value>) {
        let d = match item.result {
            Ok(d) => d,
            Err(e) => {
                self.writer.fail(&e);
                return (self.writer.take_events(), None);
            }
        };
        let logprobs = (d.logprobs.iter())
            .map(|l| logprob_entry(&self.st, l, false))
            .collect();
        let pieces = self.reply.push(&d.text, d.tokens, d.finish);
        self.writer.push_delta(pieces, logprobs);
        let Some(finish) = d.finish else {
            return (self.writer.take_events(), None);
        };
        let usage = self.usage();
        let response = self.writer.finish(finish == "length", usage);
        self.keep(&response);
        (self.writer.take_events(), Some(response))
    }

    /// Stores the finished `response` where the request asked for it. A failed response,
    /// like a cancelled one, is not stored to be continued (a background one can still be
    /// fetched).
    fn keep(&mut self, response: &Value) {
        if let Some((id, previous, mut items)) = self.store.take() {
            items.extend(response["output"].as_array().into_iter().flatten().cloned());
            let stored = Stored {
                previous,
                items,
                response: response.clone(),
            };
            self.st.responses.insert(id, stored);
        }
    }

    /// The Responses form of the counts.
    fn usage(&self) -> Value {
        let u = self.usage.lock().unwrap().clone();
        json!({
            "input_tokens": u.prompt_tokens,
            "input_tokens_details": {"cached_tokens": u.cached.iter().sum::<usize>()},
            "output_tokens": u.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reply.reasoning_tokens()},
            "total_tokens": u.prompt_tokens + u.completion_tokens,
        })
    }
}
