//! `/v1/responses` against `/v1/chat/completions` on the tiny random model: a response holds
//! the chat reply as items (greedy, so both sample the same tokens), streamed events add up to
//! the whole response, a stored response is continued by `previous_response_id` with the
//! prompt the whole conversation renders to (and the prefix cache hit), function calls and
//! their outputs go round the loop an agent runs, and what kiln does not serve is refused.
//!
//! This file holds the shared servers and request helpers; `background.rs` background
//! responses polled, picked up again and cancelled, `replies.rs` message and reasoning
//! items against the chat reply, `stored.rs` stored responses, `tools.rs` function calls,
//! `failures.rs` refusals and a failed step.

mod background;
#[path = "../common/mod.rs"]
mod common;
mod failures;
mod replies;
mod stored;
mod tools;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

const INSTRUCTIONS: &str = "You are a careful assistant. Answer in one short sentence, and call a tool when the answer needs one.";

fn server() -> &'static str {
    tools_think_server(true)
}

/// The tiny model's own template (no tools: the generic format), keeping no responses.
fn plain_server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|sc, _| sc.responses_store = 0))
}

async fn respond(body: Value) -> Value {
    respond_on(server(), body).await
}

async fn respond_on(base: &str, body: Value) -> Value {
    let (s, r) = post(base, "/v1/responses", &body).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["object"], "response", "{r}");
    r
}

/// The ids a chat body renders to.
async fn rendered(base: &str, body: Value) -> Vec<u64> {
    let (s, r) = post(base, "/v1/chat/completions/render", &body).await;
    assert_eq!(s, 200, "{r}");
    r["token_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

/// A streamed response's events, each checked to be named by its `type`.
async fn events(base: &str, body: Value) -> Vec<Value> {
    let (status, raw) = stream_raw(base, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{raw:?}");
    let mut out = Vec::new();
    for ev in raw {
        let v = typed_event(&ev);
        assert_eq!(v["sequence_number"], out.len(), "{ev}");
        out.push(v);
    }
    out
}

/// Each item without its generated ids.
fn without_ids(output: &Value) -> Vec<Value> {
    let mut items = output.as_array().unwrap().clone();
    for i in &mut items {
        let o = i.as_object_mut().unwrap();
        o.remove("id");
        o.remove("call_id");
    }
    items
}
