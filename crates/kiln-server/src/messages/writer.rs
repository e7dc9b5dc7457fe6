//! A Messages API reply's content blocks as the reply's text grows, and the streamed events
//! that tell a client so; one writer for streamed and whole replies.
//!
//! Blocks open in order: `thinking`, `text`, `tool_use` (its input streamed as JSON text); a
//! new kind of piece closes the open block. Events: `message_start`, per block
//! `content_block_start`, its `content_block_delta`s and `content_block_stop`, then
//! `message_delta` (the stop reason and counts) and `message_stop`.

use serde_json::{Value, json};

use crate::error::ApiError;
use kiln_frontend::ReplyPart as Piece;

pub struct Writer {
    message: Value,
    blocks: Vec<Value>,
    /// Whether the last block is still being written; a tool use's input text so far.
    open: bool,
    input: String,
    events: Vec<Value>,
}

fn event(kind: &str, mut body: Value) -> Value {
    body["type"] = json!(kind);
    body
}

impl Writer {
    /// A writer for `message` (the message object without its content); the first event
    /// announces it.
    pub fn new(message: Value) -> Self {
        let start = event("message_start", json!({"message": message}));
        Writer {
            message,
            blocks: Vec::new(),
            open: false,
            input: String::new(),
            events: vec![start],
        }
    }

    pub fn take_events(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.events)
    }

    fn open_kind(&self) -> Option<&str> {
        (self.open)
            .then(|| self.blocks.last().and_then(|b| b["type"].as_str()))
            .flatten()
    }

    pub fn push(&mut self, piece: Piece) {
        let (kind, field, delta, text) = match piece {
            Piece::Reasoning(t) => ("thinking", "thinking", "thinking_delta", t),
            Piece::Text(t) => ("text", "text", "text_delta", t),
            Piece::Call { call_id, name } => {
                self.open_block(
                    json!({"type": "tool_use", "id": call_id, "name": name, "input": {}}),
                );
                return;
            }
            Piece::Args(t) => {
                if self.open_kind() == Some("tool_use") {
                    self.input.push_str(&t);
                    self.delta(json!({"type": "input_json_delta", "partial_json": t}));
                }
                return;
            }
        };
        if self.open_kind() != Some(kind) {
            let mut block = json!({"type": kind, field: ""});
            if kind == "thinking" {
                block["signature"] = json!("");
            }
            self.open_block(block);
        }
        let b = self.blocks.last_mut().expect("a block is open");
        b[field] = json!(format!("{}{text}", b[field].as_str().unwrap_or("")));
        self.delta(json!({"type": delta, field: text}));
    }

    fn delta(&mut self, delta: Value) {
        let index = self.blocks.len() - 1;
        self.events.push(event(
            "content_block_delta",
            json!({"index": index, "delta": delta}),
        ));
    }

    fn open_block(&mut self, block: Value) {
        self.close();
        let index = self.blocks.len();
        self.events.push(event(
            "content_block_start",
            json!({"index": index, "content_block": block}),
        ));
        self.blocks.push(block);
        self.open = true;
    }

    fn close(&mut self) {
        if !self.open {
            return;
        }
        self.open = false;
        let index = self.blocks.len() - 1;
        if self.blocks[index]["type"] == "tool_use" {
            // The whole input, parsed (a call cut by the token limit keeps `{}`).
            let input = std::mem::take(&mut self.input);
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&input) {
                self.blocks[index]["input"] = v;
            }
        }
        self.events
            .push(event("content_block_stop", json!({"index": index})));
    }

    /// Ends the message with `stop_reason` (and the stop string that ended it); returns it.
    pub fn finish(
        &mut self,
        stop_reason: &str,
        stop_sequence: Option<String>,
        usage: Value,
    ) -> Value {
        self.close();
        let m = &mut self.message;
        m["content"] = Value::Array(self.blocks.clone());
        m["stop_reason"] = json!(stop_reason);
        m["stop_sequence"] = json!(stop_sequence);
        m["usage"] = usage.clone();
        let delta = json!({"delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence}, "usage": usage});
        self.events.push(event("message_delta", delta));
        self.events.push(event("message_stop", json!({})));
        self.message.clone()
    }

    /// Ends the stream with an `error` event.
    pub fn fail(&mut self, e: &ApiError) {
        self.events.push(super::error_body(e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_open_and_close_in_order() {
        let mut w = Writer::new(json!({"id": "msg_1", "type": "message", "content": []}));
        for p in [
            Piece::Reasoning("Hm".into()),
            Piece::Reasoning(".".into()),
            Piece::Text("Sure.".into()),
            Piece::Call {
                call_id: "toolu_1".into(),
                name: "get".into(),
            },
            Piece::Args("{\"a\": ".into()),
            Piece::Args("1}".into()),
        ] {
            w.push(p);
        }
        let m = w.finish("tool_use", None, json!({"output_tokens": 5}));
        let kinds: Vec<String> = w
            .take_events()
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(
            m["content"],
            json!([{"type": "thinking", "thinking": "Hm.", "signature": ""}, {"type": "text", "text": "Sure."},
                {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"a": 1}}])
        );
        assert_eq!(m["stop_reason"], "tool_use");
    }
}
