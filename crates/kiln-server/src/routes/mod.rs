//! HTTP routes, one file per API surface, plus the bits they share.

mod beam;
pub mod chat;
mod chat_tools;
pub mod completions;
pub mod embeddings;
pub mod lora;
pub mod misc;
pub mod render;
pub mod sleep;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::generate::TokenLogprob;
use crate::state::Shared;

pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn random_id(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::random::<u64>())
}

pub use kiln_frontend::{token_name, token_text};

/// A sampled token's log-probability as OpenAI writes it (kiln-frontend's entry).
pub fn logprob_entry(st: &Shared, l: &TokenLogprob, as_ids: bool) -> Value {
    kiln_frontend::logprob_entry(&st.model.tokenizer, (l.id, l.logprob), &l.top, as_ids)
}

/// vLLM's `prompt_logprobs`: `null` for the prompt's first token, then for each scored one
/// an object keyed by token id holding it and its alternatives, each with `logprob`, `rank`
/// and `decoded_token`.
pub fn prompt_logprobs_json(st: &Shared, scored: &[TokenLogprob]) -> Value {
    let tok = &st.model.tokenizer;
    let entry = |id: u32, logprob: f32, rank: Option<u32>| {
        (
            id.to_string(),
            json!({"logprob": logprob, "rank": rank, "decoded_token": token_text(tok, id)}),
        )
    };
    let rows = scored.iter().map(|l| {
        let mut m = Map::new();
        for (i, &(id, lp)) in l.top.iter().enumerate() {
            let (k, v) = entry(id, lp, Some(i as u32 + 1));
            m.insert(k, v);
        }
        let (k, v) = entry(l.id, l.logprob, l.rank);
        m.insert(k, v);
        Value::Object(m)
    });
    std::iter::once(Value::Null).chain(rows).collect()
}
