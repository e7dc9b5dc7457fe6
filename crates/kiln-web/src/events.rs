//! What one step means to JavaScript: each engine update of a generation becomes an
//! [`Event`] `{id, tokenId, text, reasoning, finished, numTokens, promptTokens, logprobs}`
//! for its callback, its text cut at the generation's stop strings and its reasoning (a
//! `<think>` block) set apart from the answer (`text`); under tools also `deltas` (the chat
//! deltas the answer adds, calls parsed as they are written) and, at the end, `reply` (the
//! whole answer parsed).

use std::collections::HashMap;

use js_sys::{Function, Object};
use kiln_engine::{Engine, FinishReason, RequestUpdate};
use kiln_frontend::tools::{ToolPlan, ToolStream};
use kiln_frontend::{Frontend, ReasoningStream, TextStream, logprob_entry, unit_length};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use crate::set;

/// One running generation.
pub(crate) struct Chat {
    pub text: TextStream,
    pub split: ReasoningStream,
    pub callback: Option<Function>,
    pub num_tokens: u32,
    pub prompt_tokens: u32,
    /// Alternatives reported per token, when log-probabilities were asked for.
    pub logprobs: Option<u32>,
    /// The request's tools, where it offers them.
    pub tools: Option<ChatTools>,
    /// An embedding request: its one event carries the embedding, not the token's text.
    pub embedding: bool,
}

/// A reply under tools: the plan, its answer parsed as it grows, and the answer so far.
pub(crate) struct ChatTools {
    plan: ToolPlan,
    stream: ToolStream,
    answer: String,
}

impl ChatTools {
    pub fn new(plan: ToolPlan) -> Self {
        ChatTools {
            stream: ToolStream::for_plan(&plan),
            plan,
            answer: String::new(),
        }
    }

    /// Takes the answer's next text; returns the chat deltas it adds and, once `finish` is
    /// given, the finish reason (the calls' once it called) and the whole reply parsed.
    fn push(&mut self, text: &str, finish: Option<&str>) -> (Vec<Value>, Option<(String, Value)>) {
        let ChatTools {
            plan,
            stream,
            answer,
        } = self;
        answer.push_str(text);
        let deltas = stream.push(text, || plan.format.new_call_id());
        let Some(finish) = finish else {
            return (deltas, None);
        };
        let streamed = plan.streamed_finish(stream.called(), finish);
        let (content, calls, whole) = plan.finished_reply(answer, finish);
        let reply = json!({"content": content, "tool_calls": calls, "finish_reason": whole});
        (deltas, Some((streamed.to_string(), reply)))
    }
}

/// One token of one generation, ready for JavaScript.
#[derive(Default)]
pub(crate) struct Event {
    pub id: u64,
    pub token_id: Option<u32>,
    pub text: String,
    pub reasoning: String,
    pub finished: Option<String>,
    pub num_tokens: u32,
    pub prompt_tokens: u32,
    /// The token's log-probability entry as OpenAI's chat writes it, when asked for.
    pub logprobs: Option<Value>,
    /// Under tools: the chat deltas this token's text adds.
    pub deltas: Option<Vec<Value>>,
    /// Under tools, on the last event: the whole reply parsed.
    pub reply: Option<Value>,
    /// An embedding request's embedding (unit length).
    pub embedding: Option<Vec<f32>>,
    pub callback: Option<Function>,
}

/// `v` (any JSON-serializable value) as a JavaScript value.
fn js(v: &impl serde::Serialize) -> JsValue {
    let text = serde_json::to_string(v).unwrap_or_default();
    js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL)
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
        set(&o, "promptTokens", self.prompt_tokens);
        let or_null = |v: Option<&Value>| v.map(js).unwrap_or(JsValue::NULL);
        set(&o, "logprobs", or_null(self.logprobs.as_ref()));
        if let Some(e) = &self.embedding {
            set(&o, "embedding", js_sys::Float32Array::from(e.as_slice()));
        }
        if let Some(d) = &self.deltas {
            set(&o, "deltas", js(d));
            set(&o, "reply", or_null(self.reply.as_ref()));
        }
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
    let mut split = chat.split.push(&piece.text, finished.is_some());
    let mut embedding = None;
    if chat.embedding {
        // The token exists only to carry the prefill's hidden state.
        split.content.clear();
        embedding = u
            .token
            .as_ref()
            .and_then(|t| t.hidden.clone())
            .map(unit_length);
    }
    let mut finished = finished.map(|f| finish_name(f).to_string());
    let (mut deltas, mut reply) = (None, None);
    if let Some(t) = &mut chat.tools {
        let (d, end) = t.push(&split.content, finished.as_deref());
        deltas = Some(d);
        if let Some((finish, whole)) = end {
            (finished, reply) = (Some(finish), Some(whole));
        }
    }
    let (num_tokens, callback) = (chat.num_tokens, chat.callback.clone());
    let prompt_tokens = chat.prompt_tokens;
    if finished.is_some() {
        chats.remove(&u.id);
    }
    events.push(Event {
        id: u.id,
        token_id,
        text: split.content,
        reasoning: split.reasoning,
        finished,
        num_tokens,
        prompt_tokens,
        logprobs,
        deltas,
        reply,
        embedding,
        callback,
    });
}
