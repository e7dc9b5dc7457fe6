//! A request fuzzer: seeded random and mutated JSON bodies for every endpoint that takes one
//! (chat completions, completions, their render endpoints, tokenize, detokenize), streaming or
//! not, with the structured-output and tool fields among the keys. None may get a
//! 5xx, a panic or a dropped connection: each answer is a success or an OpenAI-style error,
//! and the server still answers at the end. `KILN_FUZZ_CASES` sets the count (default 3000).

mod common;

use std::sync::OnceLock;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|sc, _| sc.max_body_bytes = 256 << 10))
}

const FIELDS: &[&str] = &[
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "n",
    "stop",
    "ignore_eos",
    "stream",
    "stream_options",
    "logprobs",
    "top_logprobs",
    "echo",
    "tokens",
    "add_special_tokens",
    "role",
    "content",
    "type",
    "text",
    "include_usage",
    "user",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "tool_calls",
    "tool_call_id",
    "name",
    "function",
    "parameters",
    "response_format",
    "json_schema",
    "schema",
    "structured_outputs",
    "json",
    "regex",
    "choice",
    "grammar",
];

/// A random JSON value, nested at most `depth` deep, biased to edge cases.
fn value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..14) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(
            *[
                0i64,
                1,
                -1,
                2,
                20,
                21,
                64,
                65,
                511,
                512,
                513,
                i64::MAX,
                i64::MIN,
                u32::MAX as i64 + 1
            ]
            .choose(rng)
            .unwrap()
        ),
        3 => json!(rng.random_range(-1000i64..1000)),
        4 => json!(
            *[
                0.0f64, -0.0, 1e-30, 0.5, 1.0, 2.0, -1.0, 1e308, -1e308, 3.4e38, 1e39
            ]
            .choose(rng)
            .unwrap()
        ),
        5 => json!(rng.random_range(-5.0f64..5.0)),
        6 => json!(
            *[
                "",
                "tiny",
                "user",
                "assistant",
                "system",
                "text",
                "image_url",
                "\u{0}",
                "é🔥\u{202e}",
                "<|im_start|>",
                "{{ raise('x') }}",
                "{% for %}"
            ]
            .choose(rng)
            .unwrap()
        ),
        7 => json!("x".repeat(rng.random_range(0..3000))),
        8 => json!(
            (0..rng.random_range(0..40))
                .map(|_| rng.random_range(0u32..400))
                .collect::<Vec<_>>()
        ),
        9 => json!(vec![u32::MAX; rng.random_range(1..3)]),
        10 if depth > 0 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| value(rng, depth - 1))
                .collect(),
        ),
        11 if depth > 0 => {
            let mut m = Map::new();
            for _ in 0..rng.random_range(0..4) {
                m.insert(
                    FIELDS.choose(rng).unwrap().to_string(),
                    value(rng, depth - 1),
                );
            }
            Value::Object(m)
        }
        12 if depth > 0 => json!([{"role": "user", "content": value(rng, depth - 1)}]),
        _ => json!(rng.random_range(0u32..10)),
    }
}

fn valid(path: &str, rng: &mut StdRng) -> Value {
    let stream = rng.random::<bool>();
    match path {
        p if p.starts_with("/v1/chat/completions") => {
            let mut body = json!({"model": "tiny", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3, "temperature": 0, "stream": stream});
            // A third of the chat bodies start from valid structured-output or tool requests.
            match rng.random_range(0..6) {
                0 => body["response_format"] = json!({"type": "json_object"}),
                1 => {
                    body["tools"] = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}]);
                    body["tool_choice"] = json!("required");
                }
                _ => {}
            }
            body
        }
        p if p.starts_with("/v1/completions") => {
            json!({"model": "tiny", "prompt": "once upon", "max_tokens": 3, "stream": stream})
        }
        "/tokenize" => json!({"model": "tiny", "prompt": "hello"}),
        _ => json!({"model": "tiny", "tokens": [1, 2, 3]}),
    }
}

/// A valid body with a few fields replaced, removed or added; or raw bytes mangled.
fn mutated(path: &str, rng: &mut StdRng) -> Vec<u8> {
    let mut body = valid(path, rng);
    let obj = body.as_object_mut().unwrap();
    for _ in 0..rng.random_range(1..4) {
        let key = FIELDS.choose(rng).unwrap().to_string();
        match rng.random_range(0..4) {
            0 => {
                obj.remove(&key);
            }
            _ => {
                obj.insert(key, value(rng, 3));
            }
        }
    }
    // Keep generations short where they are valid, so that the run stays bounded.
    if let Some(m) = obj.get("max_tokens").and_then(Value::as_i64)
        && m > 16
    {
        obj.insert("max_tokens".into(), json!(16));
    }
    if let Some(n) = obj.get("n").and_then(Value::as_i64)
        && n > 4
    {
        obj.insert("n".into(), json!(rng.random_range(-1..70)));
        obj.insert("max_tokens".into(), json!(1));
    }
    let mut bytes = serde_json::to_vec(&body).unwrap();
    match rng.random_range(0..6) {
        0 if !bytes.is_empty() => bytes.truncate(rng.random_range(0..bytes.len())),
        1 if !bytes.is_empty() => {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        2 => bytes = serde_json::to_vec(&value(rng, 3)).unwrap(),
        _ => {}
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_and_mutated_bodies_never_get_a_5xx() {
    let base = server();
    let cases: usize = std::env::var("KILN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let paths = [
        "/v1/chat/completions",
        "/v1/completions",
        "/tokenize",
        "/detokenize",
        "/v1/chat/completions/render",
        "/v1/completions/render",
    ];
    let mut rng = StdRng::seed_from_u64(2026);
    let mut by_status = std::collections::BTreeMap::new();
    for case in 0..cases {
        let path = paths[case % paths.len()];
        let body = mutated(path, &mut rng);
        let shown = String::from_utf8_lossy(&body)
            .chars()
            .take(400)
            .collect::<String>();
        let r = client()
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("case {case} {path}: no answer ({e}) to {shown}"));
        let status = r.status().as_u16();
        let ctype = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = r
            .text()
            .await
            .unwrap_or_else(|e| panic!("case {case} {path}: body cut ({e}) for {shown}"));
        *by_status.entry(status).or_insert(0) += 1;
        assert!(
            status < 500,
            "case {case} {path}: {status} {text} for {shown}"
        );
        if status >= 400 {
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|_| panic!("case {case}: not JSON: {text}"));
            let e = &v["error"];
            assert!(
                e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string(),
                "case {case}: {v}"
            );
        } else if ctype.starts_with("text/event-stream") {
            assert!(
                text.trim_end().ends_with("data: [DONE]"),
                "case {case}: {text}"
            );
            assert!(
                !text.contains("\"server_error\""),
                "case {case} {path}: {text} for {shown}"
            );
        }
    }
    eprintln!("fuzz: {cases} bodies, answers by status: {by_status:?}");
    let (s, _) = get(base, "/health").await;
    assert_eq!(s, 200);
    assert!(
        by_status.get(&200).is_some_and(|&n| n > cases / 20),
        "too few valid bodies: {by_status:?}"
    );
}
