//! What one step means to JavaScript: each engine update of a generation becomes an
//! [`Event`] `{id, tokenId, text, reasoning, finished, numTokens, logprobs}` for its callback, its text
//! cut at the generation's stop strings and its reasoning (a `<think>` block) set apart from
//! the answer (`text`).

use std::collections::HashMap;

use js_sys::{Function, Object};
use kiln_engine::{Engine, FinishReason, RequestUpdate};
use kiln_frontend::{Frontend, ReasoningStream, TextStream, logprob_entry};
use wasm_bindgen::prelude::*;

use crate::set;

/// One running generation.
pub(crate) struct Chat {
    pub text: TextStream,
    pub split: ReasoningStream,
    pub callback: Option<Function>,
    pub num_tokens: u32,
    /// Alternatives reported per token, when log-probabilities were asked for.
    pub logprobs: Option<u32>,
}

/// One token of one generation, ready for JavaScript.
pub(crate) struct Event {
    pub id: u64,
    pub token_id: Option<u32>,
    pub text: String,
    pub reasoning: String,
    pub finished: Option<String>,
    pub num_tokens: u32,
    /// The token's log-probability entry as OpenAI's chat writes it, when asked for.
    pub logprobs: Option<serde_json::Value>,
    pub callback: Option<Function>,
}

impl Event {
    pub fn to_js(&self) -> Object {
        let o = Object::new();
        set(&o, "id", self.id as f64);
        set(
            &o,
            "tokenId",
            self.token_id.map(JsValue::from).unwrap_or(JsValue::NULL),
        );
        set(&o, "text", self.text.as_str());
        set(&o, "reasoning", self.reasoning.as_str());
        set(
            &o,
            "finished",
            self.finished
                .as_deref()
                .map(JsValue::from_str)
                .unwrap_or(JsValue::NULL),
        );
        set(&o, "numTokens", self.num_tokens);
        let logprobs = match &self.logprobs {
            Some(v) => js_sys::JSON::parse(&v.to_string()).unwrap_or(JsValue::NULL),
            None => JsValue::NULL,
        };
        set(&o, "logprobs", logprobs);
        o
    }
}

fn finish_name(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Abort => "abort",
    }
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(s: &str);
}

pub(crate) fn web_log(s: &str) {
    #[cfg(target_arch = "wasm32")]
    console_warn(s);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{s}");
}

/// Turns an engine update into an event; a stop string ends the generation here.
pub(crate) fn handle(
    u: RequestUpdate,
    chats: &mut HashMap<u64, Chat>,
    engine: &mut Engine,
    frontend: &Frontend,
    events: &mut Vec<Event>,
) {
    let Some(chat) = chats.get_mut(&u.id) else {
        return;
    };
    let token_id = u.token.as_ref().map(|t| t.token_id);
    if token_id.is_none() && u.finished.is_none() {
        return;
    }
    if token_id.is_some() {
        chat.num_tokens += 1;
    }
    let piece = chat
        .text
        .update(&frontend.tokenizer, &u)
        .unwrap_or_default();
    let mut finished = u.finished;
    if piece.stopped && finished.is_none() {
        engine.abort(u.id);
        finished = Some(FinishReason::Stop);
    }
    // The sampler reports a token's log-probability whenever alternatives were asked for.
    let logprobs = chat.logprobs.zip(u.token.as_ref()).and_then(|(n, t)| {
        let top = &t.top_logprobs[..t.top_logprobs.len().min(n as usize)];
        let lp = t.logprob?;
        Some(logprob_entry(
            &frontend.tokenizer,
            (t.token_id, lp),
            top,
            false,
        ))
    });
    let split = chat.split.push(&piece.text, finished.is_some());
    let (num_tokens, callback) = (chat.num_tokens, chat.callback.clone());
    if finished.is_some() {
        chats.remove(&u.id);
    }
    events.push(Event {
        id: u.id,
        token_id,
        text: split.content,
        reasoning: split.reasoning,
        finished: finished.map(|f| finish_name(f).to_string()),
        num_tokens,
        logprobs,
        callback,
    });
}
