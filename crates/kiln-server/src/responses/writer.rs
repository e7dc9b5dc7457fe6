//! A response's output items as the reply's text grows, and the streamed events that tell
//! a client so. The same writer builds a response sent whole (its events dropped), so a
//! streamed response and a whole one hold the same items.
//!
//! Items open in order: `reasoning` (its text in one `reasoning_text` part), `message` (one
//! `output_text` part), `function_call` (its arguments as they are written); a new kind of
//! piece closes the open item. Events are `response.created` and `response.in_progress`, then
//! per item `output_item.added`, its part's `content_part.added`, the deltas, the
//! `.done` events and `output_item.done`; the last is `response.completed` (or
//! `response.incomplete`, `response.failed`), holding the whole response.
//!
//! Log-probabilities (when the request includes them) go with the answer's text: each
//! `output_text.delta` carries those of the tokens that wrote it, and the part holds them
//! all; tokens that wrote only reasoning or a call have none in the response.

use serde_json::{Value, json};

use super::random_id;
use crate::error::ApiError;
pub use kiln_frontend::ReplyPart as Piece;

pub struct Writer {
    response: Value,
    output: Vec<Value>,
    /// Whether the last output item is still being written.
    open: bool,
    events: Vec<Value>,
    sequence: u64,
    /// Log-probabilities of tokens whose text has not been written yet.
    pending: Vec<Value>,
}

impl Writer {
    /// A writer for `response` (the response object without its output, `queued` or
    /// `in_progress`); the first events announce it as it is, then in progress.
    pub fn new(mut response: Value) -> Self {
        response["output"] = json!([]);
        let mut w = Writer {
            response,
            output: Vec::new(),
            open: false,
            events: Vec::new(),
            sequence: 0,
            pending: Vec::new(),
        };
        let r = w.response.clone();
        w.event("response.created", json!({"response": r}));
        w.response["status"] = json!("in_progress");
        let r = w.response.clone();
        w.event("response.in_progress", json!({"response": r}));
        w
    }

    /// The response as written so far (the open item's text included).
    pub fn snapshot(&self) -> Value {
        let mut r = self.response.clone();
        r["output"] = Value::Array(self.output.clone());
        r
    }

    /// Whether the response has ended (completed, incomplete, failed or cancelled).
    pub fn ended(&self) -> bool {
        self.response["status"] != "in_progress"
    }

    /// Ends the response as cancelled, the open item incomplete, with no event (the stream
    /// of a cancelled response just ends). Returns the response.
    pub fn cancel(&mut self) -> Value {
        if self.open {
            self.open = false;
            if let Some(item) = self.output.last_mut() {
                item["status"] = json!("incomplete");
            }
        }
        self.response["status"] = json!("cancelled");
        self.snapshot()
    }

    /// The events written since the last call.
    pub fn take_events(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.events)
    }

    fn event(&mut self, kind: &str, mut body: Value) {
        body["type"] = json!(kind);
        body["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.events.push(body);
    }

    /// The open item's kind, if one is open.
    fn open_kind(&self) -> Option<&str> {
        (self.open)
            .then(|| self.output.last().and_then(|i| i["type"].as_str()))
            .flatten()
    }

    /// Takes what one delta of the reply wrote, with its tokens' log-probabilities (empty
    /// unless asked for): they go with the answer's text the delta wrote, or wait while its
    /// text is held back, or are dropped when it wrote only reasoning or calls.
    pub fn push_delta(&mut self, pieces: Vec<Piece>, logprobs: Vec<Value>) {
        self.pending.extend(logprobs);
        if pieces.is_empty() {
            return;
        }
        if !pieces.iter().any(|p| matches!(p, Piece::Text(_))) {
            self.pending.clear();
        }
        for p in pieces {
            self.push(p);
        }
    }

    pub fn push(&mut self, piece: Piece) {
        let index = self.output.len();
        match piece {
            Piece::Reasoning(t) => {
                if self.open_kind() != Some("reasoning") {
                    self.open_item(
                        json!({"type": "reasoning", "id": random_id("rs"), "summary": [], "content": []}),
                        Some(json!({"type": "reasoning_text", "text": ""})),
                    );
                }
                self.part_delta("response.reasoning_text.delta", &t, None);
            }
            Piece::Text(t) => {
                if self.open_kind() != Some("message") {
                    self.open_item(
                        json!({"type": "message", "id": random_id("msg"), "role": "assistant", "content": []}),
                        Some(json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []})),
                    );
                }
                let logprobs = std::mem::take(&mut self.pending);
                self.part_delta("response.output_text.delta", &t, Some(logprobs));
            }
            Piece::Call { call_id, name } => self.open_item(
                json!({"type": "function_call", "id": random_id("fc"), "call_id": call_id, "name": name, "arguments": ""}),
                None,
            ),
            Piece::Args(t) => {
                let Some(item) = self.output.last_mut().filter(|_| self.open) else {
                    return;
                };
                item["arguments"] = json!(format!("{}{t}", item["arguments"].as_str().unwrap_or("")));
                let id = item["id"].clone();
                self.event(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index - 1, "delta": t}),
                );
            }
        }
    }

    /// Closes the open item and opens `item`, with `part` as its one content part.
    fn open_item(&mut self, mut item: Value, part: Option<Value>) {
        self.close("completed");
        item["status"] = json!("in_progress");
        let (id, index) = (item["id"].clone(), self.output.len());
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        if let Some(part) = part {
            self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            );
            item["content"] = json!([part]);
        }
        self.output.push(item);
        self.open = true;
    }

    /// Appends `t` to the open item's part, with its tokens' log-probabilities for an
    /// `output_text` part.
    fn part_delta(&mut self, kind: &str, t: &str, logprobs: Option<Vec<Value>>) {
        let index = self.output.len() - 1;
        let item = &mut self.output[index];
        let id = item["id"].clone();
        let part = &mut item["content"][0];
        part["text"] = json!(format!("{}{t}", part["text"].as_str().unwrap_or("")));
        let mut event =
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": t});
        if let Some(lps) = logprobs {
            if let Some(all) = part["logprobs"].as_array_mut() {
                all.extend(lps.iter().cloned());
            }
            event["logprobs"] = Value::Array(lps);
        }
        self.event(kind, event);
    }

    /// Ends the open item with `status`.
    fn close(&mut self, status: &str) {
        if !self.open {
            return;
        }
        self.open = false;
        let index = self.output.len() - 1;
        self.output[index]["status"] = json!(status);
        let item = self.output[index].clone();
        let at = json!({"item_id": item["id"], "output_index": index});
        let with = |mut v: Value, extra: Value| {
            for (k, x) in extra.as_object().into_iter().flatten() {
                v[k] = x.clone();
            }
            v
        };
        let part = &item["content"][0];
        match item["type"].as_str() {
            Some("function_call") => self.event(
                "response.function_call_arguments.done",
                with(
                    at.clone(),
                    json!({"name": item["name"], "arguments": item["arguments"]}),
                ),
            ),
            Some(kind) => {
                let done = if kind == "reasoning" {
                    "response.reasoning_text.done"
                } else {
                    "response.output_text.done"
                };
                let part_at = with(at.clone(), json!({"content_index": 0}));
                let mut text = json!({"text": part["text"]});
                if kind != "reasoning" {
                    text["logprobs"] = part["logprobs"].clone();
                }
                self.event(done, with(part_at.clone(), text));
                self.event(
                    "response.content_part.done",
                    with(part_at, json!({"part": part})),
                );
            }
            None => {}
        }
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }

    /// Ends the response: `incomplete` when the token limit cut it (the open item then
    /// ends incomplete too). Returns the whole response.
    pub fn finish(&mut self, cut: bool, usage: Value) -> Value {
        self.close(if cut { "incomplete" } else { "completed" });
        let r = &mut self.response;
        r["status"] = json!(if cut { "incomplete" } else { "completed" });
        if cut {
            r["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        r["output"] = Value::Array(self.output.clone());
        r["usage"] = usage;
        let r = self.response.clone();
        let kind = if cut {
            "response.incomplete"
        } else {
            "response.completed"
        };
        self.event(kind, json!({"response": r}));
        r
    }

    /// Ends the response as failed by `e`: an `error` event, then `response.failed`.
    /// Returns the response.
    pub fn fail(&mut self, e: &ApiError) -> Value {
        self.close("incomplete");
        let code = e.code.unwrap_or(e.kind);
        self.event(
            "error",
            json!({"code": code, "message": e.message, "param": e.param}),
        );
        self.response["status"] = json!("failed");
        self.response["error"] = json!({"code": code, "message": e.message});
        self.response["output"] = Value::Array(self.output.clone());
        let r = self.response.clone();
        self.event("response.failed", json!({"response": r.clone()}));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn items_open_and_close_in_order() {
        let mut w = Writer::new(json!({"id": "resp_1", "object": "response"}));
        for p in [
            Piece::Reasoning("Think".into()),
            Piece::Reasoning("ing.".into()),
            Piece::Text("Hi".into()),
            Piece::Call {
                call_id: "c1".into(),
                name: "get".into(),
            },
            Piece::Args("{\"a\"".into()),
            Piece::Args(": 1}".into()),
        ] {
            w.push(p);
        }
        let r = w.finish(false, json!({"output_tokens": 3}));
        let events = w.take_events();
        assert_eq!(
            kinds(&events),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.reasoning_text.delta",
                "response.reasoning_text.delta",
                "response.reasoning_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let numbers: Vec<u64> = events
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());
        let out = r["output"].as_array().unwrap();
        assert_eq!(out[0]["content"][0]["text"], "Thinking.");
        assert_eq!(out[1]["content"][0]["text"], "Hi");
        assert_eq!(
            (out[2]["call_id"].as_str(), out[2]["arguments"].as_str()),
            (Some("c1"), Some("{\"a\": 1}"))
        );
        assert!(out.iter().all(|i| i["status"] == "completed"));
        assert_eq!(r["status"], "completed");
        // The last event holds the whole response; each item's done event holds the item.
        assert_eq!(events.last().unwrap()["response"], r);
        assert_eq!(events[19]["item"], out[2]);
        assert_eq!(events[19]["output_index"], 2);
    }

    #[test]
    fn log_probabilities_go_with_the_text_their_tokens_wrote() {
        let mut w = Writer::new(json!({}));
        let lp = |t: &str| json!({"token": t, "logprob": -1.0});
        // Reasoning tokens have none; a held-back token's wait for its text.
        w.push_delta(vec![Piece::Reasoning("Hm".into())], vec![lp("Hm")]);
        w.push_delta(vec![], vec![lp("<")]);
        w.push_delta(vec![Piece::Text("<b".into())], vec![lp("b")]);
        w.push_delta(vec![Piece::Text("!".into())], vec![lp("!")]);
        let r = w.finish(false, json!({}));
        let part = &r["output"][1]["content"][0];
        assert_eq!(part["logprobs"], json!([lp("<"), lp("b"), lp("!")]));
        let events = w.take_events();
        let deltas: Vec<&Value> = (events.iter())
            .filter(|e| e["type"] == "response.output_text.delta")
            .collect();
        assert_eq!(deltas[0]["logprobs"], json!([lp("<"), lp("b")]));
        assert_eq!(deltas[1]["logprobs"], json!([lp("!")]));
        let done = events
            .iter()
            .find(|e| e["type"] == "response.output_text.done");
        assert_eq!(done.unwrap()["logprobs"], part["logprobs"]);
        assert!(r["output"][0]["content"][0].get("logprobs").is_none());
    }

    #[test]
    fn a_cut_reply_is_incomplete_and_a_failure_says_why() {
        let mut w = Writer::new(json!({}));
        w.push(Piece::Text("Once upon".into()));
        let r = w.finish(true, json!({}));
        assert_eq!(
            (r["status"].as_str(), r["output"][0]["status"].as_str()),
            (Some("incomplete"), Some("incomplete"))
        );
        assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(
            w.take_events().last().unwrap()["type"],
            "response.incomplete"
        );

        let mut w = Writer::new(json!({}));
        w.take_events();
        w.fail(&ApiError::unavailable("the engine restarted"));
        let events = w.take_events();
        assert_eq!(kinds(&events), ["error", "response.failed"]);
        assert_eq!(events[1]["response"]["error"]["code"], "unavailable");
    }
}
