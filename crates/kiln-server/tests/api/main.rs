//! The OpenAI surface against the tiny random model: errors (status and shape, and the server
//! keeps answering), completions, stop strings, prefix caching, tokenize, metrics syntax,
//! embeddings, structural tags, the request log, beam search.
//!
//! This file holds the shared server and request helpers; `errors.rs` the errors,
//! `completions.rs` completions and stop strings, `prefix_cache.rs` prefix caching,
//! `endpoints.rs` the chat stream, models and tokenize, `metrics.rs` the metrics syntax,
//! `embeddings.rs` the embeddings endpoint, `structural_tag.rs` structural tags, `request_log.rs` vLLM's request log, `beam_search.rs` beam search.

mod beam_search;
#[path = "../common/mod.rs"]
mod common;
mod completions;
mod embeddings;
mod endpoints;
mod errors;
mod metrics;
mod prefix_cache;
mod request_log;
mod structural_tag;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        start_tiny(|sc, _| {
            sc.api_key = Some(API_KEY.into());
            sc.max_body_bytes = 64 << 10;
            sc.model_aliases = vec!["tiny-alias".into()];
            sc.request_id_headers = true;
            sc.allowed_origins = vec!["http://page.test".into()];
        })
    })
}

fn chat(content: &str, extra: Value) -> Value {
    let mut b = json!({"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

async fn still_answers(base: &str) {
    let (s, b) = post(base, "/v1/chat/completions", &chat("hello", json!({}))).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["choices"][0]["message"]["role"], "assistant");
}
