//! OpenAI's `logit_bias` on the tiny model: +100 makes a token every greedy choice, -100 bans
//! the greedy choice, with penalties too, and bad maps are refused naming the field. Tokens
//! are read back by id (vLLM's `return_tokens_as_token_ids`).

mod common;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|_, _| {}))
}

/// The ids of a greedy completion of `prompt` with `extra` fields.
async fn greedy_ids(extra: Value) -> Vec<u64> {
    let mut body = json!({"model": "tiny", "prompt": "the cat sat", "max_tokens": 6,
        "temperature": 0.0, "ignore_eos": true, "logprobs": 0, "return_tokens_as_token_ids": true});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let (s, r) = post(server(), "/v1/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    r["choices"][0]["logprobs"]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let t = t.as_str().unwrap();
            t.strip_prefix("token_id:").unwrap().parse().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn a_bias_moves_greedy_choices() {
    let plain = greedy_ids(json!({})).await;
    assert_eq!(plain.len(), 6);
    // +100 on one token: every choice.
    let lifted = greedy_ids(json!({"logit_bias": {"70": 100}})).await;
    assert_eq!(lifted, vec![70; 6]);
    // -100 on the first greedy choice: never chosen.
    let first = plain[0].to_string();
    let banned = greedy_ids(json!({"logit_bias": {first.clone(): -100}})).await;
    assert!(!banned.contains(&plain[0]), "{banned:?} {plain:?}");
    // With penalties, the bias still holds (the entries share the sampler's list).
    let both = greedy_ids(
        json!({"logit_bias": {"70": 100}, "repetition_penalty": 1.3, "presence_penalty": 0.5}),
    )
    .await;
    assert_eq!(both, vec![70; 6]);
    // A small bias changes nothing.
    assert_eq!(greedy_ids(json!({"logit_bias": {"70": 0}})).await, plain);
}

#[tokio::test]
async fn bad_biases_are_refused() {
    let ask = |bias: Value| json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "logit_bias": bias});
    for bias in [
        json!({"x": 1}),
        json!({"70": 101}),
        json!({"70": -100.5}),
        json!({"70": 1, "070": 2}),
        json!({"100000": 1}),
    ] {
        let (s, e) = post(server(), "/v1/chat/completions", &ask(bias.clone())).await;
        assert_eq!(s, 400, "{bias}: {e}");
        let param = e["error"]["param"].as_str();
        assert!(
            param == Some("logit_bias")
                || e["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("logit_bias"),
            "{bias}: {e}"
        );
    }
}
