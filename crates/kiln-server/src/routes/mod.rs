//! HTTP routes, one file per API surface, plus the bits they share.

pub mod chat;
pub mod completions;
pub mod misc;
pub mod render;

use std::time::{SystemTime, UNIX_EPOCH};

use kiln_model::Tokenizer;

pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn random_id(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::random::<u64>())
}

/// A token's text for logprobs (special tokens included).
pub fn token_text(tok: &Tokenizer, id: u32) -> String {
    tok.decode(&[id], false).unwrap_or_default()
}
