//! Ending a rendered conversation otherwise than with a new assistant turn, on the tiny model:
//! vLLM's `add_generation_prompt: false` (no header) and `continue_final_message` (the reply
//! goes on from the final assistant message's text, which is also what a final assistant
//! message means to the Messages API: Anthropic's prefill); vLLM's `echo` starts the reply
//! with that message's text.

mod common;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|_, _| {}))
}

const PREFILL: &str = "The cat sat on";

fn conversation(prefill: bool) -> Value {
    let mut m = vec![
        json!({"role": "system", "content": "Answer in one sentence."}),
        json!({"role": "user", "content": "Where did the cat sit?"}),
    ];
    if prefill {
        m.push(json!({"role": "assistant", "content": PREFILL}));
    }
    Value::Array(m)
}

async fn rendered(extra: Value) -> Result<Vec<u64>, Value> {
    let mut body = json!({"messages": conversation(true)});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let (s, r) = post(server(), "/v1/chat/completions/render", &body).await;
    match s {
        200 => Ok((r["token_ids"].as_array().unwrap().iter())
            .map(|t| t.as_u64().unwrap())
            .collect()),
        _ => Err(r),
    }
}

async fn text_of(ids: &[u64]) -> String {
    let (s, r) = post(server(), "/detokenize", &json!({"tokens": ids})).await;
    assert_eq!(s, 200, "{r}");
    r["prompt"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_conversation_ends_as_asked() {
    let new_turn = rendered(json!({})).await.unwrap();
    let as_is = rendered(json!({"add_generation_prompt": false}))
        .await
        .unwrap();
    let cont = rendered(json!({"continue_final_message": true}))
        .await
        .unwrap();
    // As is: the whole last turn, closed, and no header after it.
    assert!(new_turn.starts_with(&as_is) && new_turn.len() > as_is.len());
    // Continued: the last turn up to its text's end, its end-of-turn marker cut.
    assert!(as_is.len() > cont.len() && as_is.starts_with(&cont));
    assert!(text_of(&cont).await.ends_with(PREFILL));
    assert!(!text_of(&as_is).await.ends_with(PREFILL));

    // The reply goes on from there: what a completion of that very prompt gives.
    let ask = json!({"messages": conversation(true), "continue_final_message": true,
        "max_tokens": 8, "temperature": 0, "ignore_eos": true});
    let (s, chat) = post(server(), "/v1/chat/completions", &ask).await;
    assert_eq!(s, 200, "{chat}");
    let completion = json!({"prompt": cont, "max_tokens": 8, "temperature": 0, "ignore_eos": true});
    let (s, plain) = post(server(), "/v1/completions", &completion).await;
    assert_eq!(s, 200, "{plain}");
    assert_eq!(
        chat["choices"][0]["message"]["content"],
        plain["choices"][0]["text"]
    );
    assert_eq!(chat["usage"]["prompt_tokens"], cont.len());

    // Anthropic's prefill is the same continuation.
    let prefill = json!({"messages": conversation(true).as_array().unwrap()[1..], "system": "Answer in one sentence.",
        "max_tokens": 8, "temperature": 0});
    let (s, m) = post(server(), "/v1/messages", &prefill).await;
    assert_eq!(s, 200, "{m}");
    let (_, chat) = post(
        server(),
        "/v1/chat/completions",
        &json!({"messages": conversation(true),
        "continue_final_message": true, "max_tokens": 8, "temperature": 0}),
    )
    .await;
    let text = chat["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("");
    assert_eq!(m["content"][0]["text"].as_str().unwrap_or(""), text, "{m}");
    // (Anthropic's input_tokens leave out the tokens read from the cache.)
    let u = &m["usage"];
    let input =
        u["input_tokens"].as_u64().unwrap() + u["cache_read_input_tokens"].as_u64().unwrap();
    assert_eq!(input as usize, cont.len(), "{u}");
}

#[tokio::test]
async fn what_cannot_be_continued_is_refused() {
    let both =
        rendered(json!({"continue_final_message": true, "add_generation_prompt": true})).await;
    assert_eq!(
        both.unwrap_err()["error"]["param"],
        "continue_final_message"
    );
    let r = refused(
        server(),
        "/v1/chat/completions/render",
        &json!({"messages": conversation(false), "continue_final_message": true}),
        "messages",
    )
    .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("final assistant message"),
        "{r}"
    );
}

#[tokio::test]
async fn echo_starts_the_reply_with_the_final_assistant_message() {
    let ask = |extra: Value| {
        let mut body = json!({"messages": conversation(true), "continue_final_message": true,
            "add_generation_prompt": false, "max_tokens": 6, "temperature": 0, "ignore_eos": true});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let (s, plain) = post(server(), "/v1/chat/completions", &ask(json!({}))).await;
    assert_eq!(s, 200, "{plain}");
    let reply = plain["choices"][0]["message"]["content"].as_str().unwrap();
    let (s, echoed) = post(
        server(),
        "/v1/chat/completions",
        &ask(json!({"echo": true})),
    )
    .await;
    assert_eq!(s, 200, "{echoed}");
    assert_eq!(
        echoed["choices"][0]["message"]["content"],
        format!("{PREFILL}{reply}")
    );
    for k in ["prompt_tokens", "completion_tokens"] {
        assert_eq!(
            echoed["usage"][k], plain["usage"][k],
            "the echo is not generated"
        );
    }
    // Streamed: the role's chunk carries it, and the deltas add up to the same.
    let chunks = stream(
        server(),
        "/v1/chat/completions",
        &ask(json!({"echo": true, "stream": true})),
    )
    .await;
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], PREFILL);
    let text: String = (chunks.iter())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, format!("{PREFILL}{reply}"));
    // A conversation ending with the user's message has nothing to echo; tools refuse it.
    let mut user_last = ask(json!({"echo": true}));
    user_last["messages"] = conversation(false);
    user_last["add_generation_prompt"] = json!(true);
    user_last["continue_final_message"] = json!(false);
    let (s, r) = post(server(), "/v1/chat/completions", &user_last).await;
    assert_eq!(s, 200, "{r}");
    user_last.as_object_mut().unwrap().remove("echo");
    let (_, plain) = post(server(), "/v1/chat/completions", &user_last).await;
    assert_eq!(r["choices"][0]["message"], plain["choices"][0]["message"]);
    let tools =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    refused(
        server(),
        "/v1/chat/completions",
        &ask(json!({"echo": true, "tools": tools})),
        "echo",
    )
    .await;
}
