//! The prompt's log-probabilities over HTTP, as evaluation harnesses ask for them: legacy
//! completions with `echo` and `logprobs` (`max_tokens` 0 or more), vLLM's
//! `prompt_logprobs` in completions and chat, streamed and not, against the log-probabilities
//! the server reports when it generates from each prefix of the same prompt.

mod common;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        start_tiny(|sc, _| {
            sc.api_key = Some(API_KEY.into());
        })
    })
}

/// 20 token ids of the tiny vocabulary.
fn prompt() -> Vec<u32> {
    (0..20).map(|i| 5 + (i * 37) % 200).collect()
}

async fn completion(body: Value) -> Value {
    let (s, b) = post(server(), "/v1/completions", &body).await;
    assert_eq!(s, 200, "{b}");
    b
}

fn close(a: &Value, b: &Value, what: &str) {
    let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
    // Scoring runs the prompt as one prefill, generating decodes it: other kernels' sums.
    assert!((a - b).abs() < 2e-3, "{what}: {a} vs {b}");
}

/// 12 arbitrary tokens, then 8 the model picks greedily after them (each found as the rank-1
/// alternative of the last scored position).
async fn half_greedy_prompt() -> Vec<u32> {
    let mut p: Vec<u32> = prompt()[..12].to_vec();
    for _ in 0..8 {
        let probe = [&p[..], &[0]].concat();
        let b = completion(json!({"prompt": probe, "prompt_logprobs": 1, "max_tokens": 0})).await;
        let row = b["choices"][0]["prompt_logprobs"][p.len()]
            .as_object()
            .unwrap()
            .clone();
        let (id, _) = (row.iter())
            .find(|(_, e)| e["rank"] == 1)
            .expect("a rank-1 alternative");
        p.push(id.parse().unwrap());
    }
    p
}

/// With `echo` and `logprobs` 3 and `max_tokens` 0, the logprobs object lists every prompt
/// token, the first with `null`; token `k`'s top 3 equal what a greedy completion of the
/// first `k` tokens reports for its next token, and so does its log-probability when it is
/// that token (rank 1 in vLLM's `prompt_logprobs`, asked for too, since the legacy object
/// names tokens by text and byte tokens share theirs; the last 8 are); the text is the
/// prompt's and nothing is generated.
#[tokio::test]
async fn echo_with_logprobs_scores_every_prompt_token() {
    let p = half_greedy_prompt().await;
    let body =
        json!({"prompt": p, "echo": true, "logprobs": 3, "max_tokens": 0, "prompt_logprobs": 0});
    let b = completion(body).await;
    let c = &b["choices"][0];
    let lp = &c["logprobs"];
    assert_eq!(c["finish_reason"], "length", "{b}");
    assert_eq!(b["usage"]["completion_tokens"], 0, "{b}");
    let (s, detok) = post(server(), "/detokenize", &json!({"tokens": p})).await;
    assert_eq!(s, 200);
    assert_eq!(c["text"], detok["prompt"], "the text is the prompt's");
    assert_eq!(lp["tokens"].as_array().unwrap().len(), p.len(), "{lp}");
    assert!(lp["token_logprobs"][0].is_null() && lp["top_logprobs"][0].is_null());
    let offsets: Vec<u64> = (lp["text_offset"].as_array().unwrap().iter())
        .map(|o| o.as_u64().unwrap())
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{offsets:?}");
    let mut greedy_hits = 0;
    for k in 1..p.len() {
        let g = completion(json!({"prompt": &p[..k], "max_tokens": 1, "temperature": 0, "logprobs": 3, "ignore_eos": true})).await;
        let want = &g["choices"][0]["logprobs"];
        let what = format!("prompt token {k}");
        let (got_top, want_top) = (&lp["top_logprobs"][k], &want["top_logprobs"][0]);
        // Keyed by text: tokens that decode alike (byte tokens) share a key on both sides.
        let len = |v: &Value| v.as_object().unwrap().len();
        assert_eq!(
            len(got_top),
            len(want_top),
            "{what}: {got_top} vs {want_top}"
        );
        for (text, v) in want_top.as_object().unwrap() {
            close(&got_top[text], v, &format!("{what}: alternative {text:?}"));
        }
        if c["prompt_logprobs"][k][p[k].to_string()]["rank"] == 1 {
            close(&lp["token_logprobs"][k], &want["token_logprobs"][0], &what);
            greedy_hits += 1;
        }
        let v = lp["token_logprobs"][k].as_f64().unwrap();
        assert!(v <= 0.0 && v.is_finite(), "{what}: {v}");
    }
    assert!(
        greedy_hits >= 8,
        "{greedy_hits} of 19 prompt tokens were the greedy token"
    );
}

/// Generation after an echoed, scored prompt: the logprobs object continues with the
/// generated tokens (as a plain request reports them), in one body and streamed.
#[tokio::test]
async fn echo_with_logprobs_then_generation_streamed_or_not() {
    let p = prompt();
    let body = json!({"prompt": p, "echo": true, "logprobs": 2, "max_tokens": 5, "temperature": 0, "ignore_eos": true});
    let b = completion(body.clone()).await;
    let lp = &b["choices"][0]["logprobs"];
    let plain = completion(
        json!({"prompt": p, "logprobs": 2, "max_tokens": 5, "temperature": 0, "ignore_eos": true}),
    )
    .await;
    let want = &plain["choices"][0]["logprobs"];
    assert_eq!(lp["tokens"].as_array().unwrap().len(), p.len() + 5, "{lp}");
    for i in 0..5 {
        assert_eq!(
            lp["tokens"][p.len() + i],
            want["tokens"][i],
            "generated token {i}"
        );
        close(
            &lp["token_logprobs"][p.len() + i],
            &want["token_logprobs"][i],
            "generated",
        );
    }
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let chunks = stream(server(), "/v1/completions", &streamed).await;
    let mut tokens = Vec::new();
    for c in chunks
        .iter()
        .flat_map(|c| c["choices"].as_array().cloned().unwrap_or_default())
    {
        tokens.extend(
            c["logprobs"]["tokens"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
    }
    assert_eq!(Value::from(tokens), lp["tokens"], "streamed tokens");
}

/// vLLM's `prompt_logprobs`: `null`, then per prompt token an object keyed by token id with
/// the token itself (its log-probability as the echo reports it, its rank) and the top 2
/// (ranks 1 and 2); in completions (each choice, streamed in the first chunk) and in chat
/// (streamed in the first chunk too).
#[tokio::test]
async fn vllm_prompt_logprobs_in_completions_and_chat() {
    let p = prompt();
    let echo = completion(json!({"prompt": p, "echo": true, "logprobs": 2, "max_tokens": 0})).await;
    let echo_lp = &echo["choices"][0]["logprobs"]["token_logprobs"];
    let body =
        json!({"prompt": p, "prompt_logprobs": 2, "max_tokens": 2, "n": 2, "temperature": 0});
    let b = completion(body.clone()).await;
    for choice in b["choices"].as_array().unwrap() {
        let pl = choice["prompt_logprobs"].as_array().unwrap();
        assert_eq!(pl.len(), p.len());
        assert!(pl[0].is_null());
        for k in 1..p.len() {
            let row = pl[k].as_object().unwrap();
            let me = &row[&p[k].to_string()];
            close(&me["logprob"], &echo_lp[k], &format!("prompt token {k}"));
            let rank = me["rank"].as_u64().unwrap();
            assert!(
                rank >= 1 && (row.len() == 2) == (rank <= 2),
                "token {k}: {row:?}"
            );
            let ranks: Vec<u64> = row.values().map(|e| e["rank"].as_u64().unwrap()).collect();
            assert!(
                ranks.contains(&1) && ranks.contains(&2),
                "token {k}: {row:?}"
            );
        }
    }
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let chunks = stream(server(), "/v1/completions", &streamed).await;
    let firsts: Vec<&Value> = (chunks.iter())
        .flat_map(|c| c["choices"].as_array().unwrap())
        .filter(|c| c.get("prompt_logprobs").is_some())
        .collect();
    assert_eq!(firsts.len(), 2, "one per choice");
    assert_eq!(
        firsts[0]["prompt_logprobs"],
        b["choices"][0]["prompt_logprobs"]
    );

    let messages = json!([{"role": "user", "content": "hello there"}]);
    let (s, c) = post(
        server(),
        "/v1/chat/completions",
        &json!({"messages": messages, "prompt_logprobs": 0, "max_tokens": 1}),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    let pl = c["prompt_logprobs"].as_array().unwrap();
    assert_eq!(
        pl.len() as u64,
        c["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert!(pl[0].is_null() && pl[1..].iter().all(|r| r.is_object()));
    // Streamed: on the first chunk, the same.
    let streamed =
        json!({"messages": messages, "prompt_logprobs": 0, "max_tokens": 1, "stream": true});
    let chunks = stream(server(), "/v1/chat/completions", &streamed).await;
    let with: Vec<&Value> = chunks
        .iter()
        .filter(|c| c.get("prompt_logprobs").is_some())
        .collect();
    assert_eq!(with.len(), 1, "{chunks:?}");
    assert_eq!(with[0]["prompt_logprobs"], c["prompt_logprobs"]);
}

/// A chat request with tools reports what one without does: its prompt's log-probabilities
/// (those of the prompt it renders to, scored by `/v1/completions`) and its tokens', whole
/// and streamed (each on the first chunk that carries what its tokens wrote).
#[tokio::test]
async fn with_tools_the_prompt_and_tokens_are_scored() {
    let tools =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let body = json!({"messages": [{"role": "user", "content": "hello there"}], "tools": tools,
        "prompt_logprobs": 1, "logprobs": true, "top_logprobs": 2, "max_tokens": 6, "temperature": 0});
    let (s, c) = post(server(), "/v1/chat/completions", &body).await;
    assert_eq!(s, 200, "{c}");
    let (s, r) = post(server(), "/v1/chat/completions/render", &body).await;
    assert_eq!(s, 200, "{r}");
    let ids = r["token_ids"].clone();
    let scored = completion(json!({"prompt": ids, "prompt_logprobs": 1, "max_tokens": 0})).await;
    let want = scored["choices"][0]["prompt_logprobs"].as_array().unwrap();
    let got = c["prompt_logprobs"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    assert_eq!(
        got.len() as u64,
        c["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    for (k, (g, w)) in got.iter().zip(want).enumerate().skip(1) {
        let id = ids[k].to_string();
        close(
            &g[&id]["logprob"],
            &w[&id]["logprob"],
            &format!("prompt token {k}"),
        );
    }
    let content = c["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(
        content.len() as u64,
        c["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert!(
        content
            .iter()
            .all(|e| e["top_logprobs"].as_array().unwrap().len() == 2)
    );

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let chunks = stream(server(), "/v1/chat/completions", &streamed).await;
    let with: Vec<&Value> = (chunks.iter())
        .filter(|c| c.get("prompt_logprobs").is_some())
        .collect();
    assert_eq!(with.len(), 1, "{chunks:?}");
    assert_eq!(with[0]["prompt_logprobs"], c["prompt_logprobs"]);
    let tokens: Vec<Value> = (chunks.iter())
        .filter_map(|c| c["choices"][0]["logprobs"]["content"].as_array())
        .flatten()
        .cloned()
        .collect();
    assert_eq!(tokens[..], content[..]);
}

#[tokio::test]
async fn unsupported_prompt_logprobs_requests_are_refused_by_name() {
    for (path, body, param) in [
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 0}),
            "max_tokens",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "echo": true, "max_tokens": 0}),
            "max_tokens",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "prompt_logprobs": 21}),
            "prompt_logprobs",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "prompt_logprobs": -1}),
            "prompt_logprobs",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "echo": true, "logprobs": 21}),
            "prompt_logprobs",
        ),
    ] {
        let (s, b) = post(server(), path, &body).await;
        assert_eq!(s, 400, "{body}: {b}");
        assert_eq!(b["error"]["param"], param, "{body}: {b}");
    }
}
