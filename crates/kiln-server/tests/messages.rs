//! `/v1/messages` (Anthropic's Messages API) against `/v1/chat/completions` on the tiny random
//! model: a message holds the chat reply as content blocks (greedy, so both sample the same
//! tokens), streamed events add up to the whole message, stop sequences and token limits
//! give their stop reasons, tool uses and their results go round an agent's loop with the
//! prompt chat renders for the same conversation, and errors take Anthropic's shape.

mod common;

use common::*;
use serde_json::{Value, json};

fn server() -> &'static str {
    tools_think_server(true)
}

async fn message(base: &str, body: Value) -> Value {
    let (s, m) = post(base, "/v1/messages", &body).await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(
        (m["type"].as_str(), m["role"].as_str()),
        (Some("message"), Some("assistant")),
        "{m}"
    );
    m
}

/// A streamed message's events, each checked to be named by its `type`.
async fn events(base: &str, body: Value) -> Vec<Value> {
    let (status, raw) = stream_raw(base, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{raw:?}");
    raw.iter().map(|ev| typed_event(ev)).collect()
}

/// The message a stream's events build: its blocks, stop reason and usage.
fn assembled(evs: &[Value]) -> Value {
    let mut m = evs[0]["message"].clone();
    let mut blocks: Vec<Value> = Vec::new();
    let mut input = String::new();
    for e in evs {
        match e["type"].as_str().unwrap() {
            "content_block_start" => blocks.push(e["content_block"].clone()),
            "content_block_delta" => {
                let (b, d) = (blocks.last_mut().unwrap(), &e["delta"]);
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        b["text"] = json!(format!(
                            "{}{}",
                            b["text"].as_str().unwrap(),
                            d["text"].as_str().unwrap()
                        ))
                    }
                    "thinking_delta" => {
                        b["thinking"] = json!(format!(
                            "{}{}",
                            b["thinking"].as_str().unwrap(),
                            d["thinking"].as_str().unwrap()
                        ))
                    }
                    "input_json_delta" => input.push_str(d["partial_json"].as_str().unwrap()),
                    other => panic!("delta {other}"),
                }
            }
            "content_block_stop" if !input.is_empty() => {
                blocks.last_mut().unwrap()["input"] =
                    serde_json::from_str(&std::mem::take(&mut input)).unwrap();
            }
            "message_delta" => {
                m["stop_reason"] = e["delta"]["stop_reason"].clone();
                m["stop_sequence"] = e["delta"]["stop_sequence"].clone();
                m["usage"] = e["usage"].clone();
            }
            _ => {}
        }
    }
    m["content"] = Value::Array(blocks);
    m
}

/// A message without its generated ids, and its usage as the total prompt and output
/// tokens (how much of the prompt the cache held differs between runs).
fn without_ids(m: &Value) -> Value {
    let mut m = m.clone();
    m.as_object_mut().unwrap().remove("id");
    let u = &m["usage"];
    let prompt =
        u["input_tokens"].as_u64().unwrap() + u["cache_read_input_tokens"].as_u64().unwrap();
    m["usage"] = json!({"prompt": prompt, "output": u["output_tokens"]});
    for b in m["content"].as_array_mut().unwrap() {
        b.as_object_mut().unwrap().remove("id");
    }
    m
}

#[tokio::test]
async fn a_message_holds_the_chat_reply_and_streams_the_same() {
    let chat = json!({"max_tokens": 10, "temperature": 0,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]});
    let (s, c) = post(server(), "/v1/chat/completions", &chat).await;
    assert_eq!(s, 200, "{c}");
    let body = json!({"model": "tiny", "max_tokens": 10, "temperature": 0, "system": "Be brief.",
        "metadata": {"user_id": "u1"}, "messages": [{"role": "user", "content": "Hi there"}]});
    let m = message(server(), body.clone()).await;
    assert_eq!(m["content"][0]["type"], "text", "{m}");
    assert_eq!(
        m["content"][0]["text"], c["choices"][0]["message"]["content"],
        "{m}\n{c}"
    );
    let u = &m["usage"];
    let input =
        u["input_tokens"].as_u64().unwrap() + u["cache_read_input_tokens"].as_u64().unwrap();
    assert_eq!(
        (input, &u["output_tokens"]),
        (
            c["usage"]["prompt_tokens"].as_u64().unwrap(),
            &c["usage"]["completion_tokens"]
        )
    );
    let stop = if c["choices"][0]["finish_reason"] == "length" {
        "max_tokens"
    } else {
        "end_turn"
    };
    assert_eq!(m["stop_reason"], stop);

    let mut streamed = body;
    streamed["stream"] = json!(true);
    let evs = events(server(), streamed).await;
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[..2], ["message_start", "content_block_start"]);
    assert_eq!(kinds[kinds.len() - 2..], ["message_delta", "message_stop"]);
    assert_eq!(without_ids(&assembled(&evs)), without_ids(&m));
}

#[tokio::test]
async fn a_stop_sequence_ends_the_message_and_is_named() {
    let ask = |extra: Value| {
        let mut b = json!({"max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": "Count."}]});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let full = message(server(), ask(json!({}))).await;
    let text = full["content"][0]["text"].as_str().unwrap().to_string();
    let chars: Vec<char> = text.chars().collect();
    assert!(chars.len() >= 6, "{full}");
    let stop: String = chars[3..5].iter().collect();
    let m = message(server(), ask(json!({"stop_sequences": [stop]}))).await;
    assert_eq!(
        (m["stop_reason"].as_str(), m["stop_sequence"].as_str()),
        (Some("stop_sequence"), Some(stop.as_str())),
        "{m}"
    );
    let before = &text[..text.find(&stop).unwrap()];
    assert_eq!(m["content"][0]["text"].as_str().unwrap_or(""), before);
}

#[tokio::test]
async fn tool_uses_and_results_go_round_the_loop() {
    let base = tools_think_server(false);
    let tool = json!({"name": "get_weather", "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"enum": ["Oslo", "Bergen"]}}, "required": ["city"], "additionalProperties": false}});
    let ask = json!([{"role": "user", "content": "Weather in Oslo?"}]);
    // A random model may write whitespace inside the call until cut: the first seed whose
    // reply finishes.
    let (body, m) = 'found: {
        for seed in 0..6 {
            let body = json!({"max_tokens": 200, "seed": seed, "temperature": 1.0, "tools": [tool],
                "tool_choice": {"type": "any", "disable_parallel_tool_use": true}, "messages": ask});
            let m = message(base, body.clone()).await;
            if m["stop_reason"] != "max_tokens" {
                break 'found (body, m);
            }
        }
        panic!("no reply finished");
    };
    assert_eq!(m["stop_reason"], "tool_use", "{m}");
    let uses: Vec<&Value> = m["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(uses.len(), 1, "{m}");
    let call = uses[0];
    assert!(
        ["Oslo", "Bergen"].contains(&call["input"]["city"].as_str().unwrap()),
        "{m}"
    );
    let mut streamed = body;
    streamed["stream"] = json!(true);
    assert_eq!(
        without_ids(&assembled(&events(base, streamed).await)),
        without_ids(&m)
    );

    // The result goes back; the prompt is what chat renders for the same conversation.
    let turn = json!({"tools": [tool], "messages": [ask[0],
        {"role": "assistant", "content": m["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "Rain, 7 C"}]}]});
    let (s, counted) = post(base, "/v1/messages/count_tokens", &turn).await;
    assert_eq!(s, 200, "{counted}");
    let chat_tool = json!({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.", "parameters": tool["input_schema"]}});
    let args = serde_json::to_string(&call["input"]).unwrap();
    let (s, r) = post(base, "/v1/chat/completions/render", &json!({"tools": [chat_tool], "messages": [ask[0],
        {"role": "assistant", "content": null, "tool_calls": [{"id": call["id"], "type": "function", "function": {"name": "get_weather", "arguments": args}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "Rain, 7 C"}]})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        counted["input_tokens"],
        r["token_ids"].as_array().unwrap().len()
    );
    let mut next = turn;
    next["max_tokens"] = json!(4);
    let m = message(base, next).await;
    assert!(
        m["usage"]["cache_read_input_tokens"].as_u64() > Some(0),
        "{m}"
    );
}

#[tokio::test]
async fn errors_take_anthropics_shape() {
    for (body, says) in [
        (
            json!({"messages": [{"role": "user", "content": "x"}]}),
            "max_tokens",
        ),
        (
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
            "`image`",
        ),
        (
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "frobnicate": 1}),
            "frobnicate",
        ),
        (json!({"max_tokens": 4, "messages": "x"}), "invalid request"),
    ] {
        let (s, e) = post(server(), "/v1/messages", &body).await;
        assert_eq!(
            (s, e["type"].as_str(), e["error"]["type"].as_str()),
            (400, Some("error"), Some("invalid_request_error")),
            "{e}"
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{e}"
        );
    }
    let (s, e) = post(
        server(),
        "/v1/messages",
        &json!({"model": "other", "max_tokens": 4, "messages": []}),
    )
    .await;
    assert_eq!(
        (s, e["error"]["type"].as_str()),
        (404, Some("not_found_error")),
        "{e}"
    );
}
