//! A request fuzzer (proptest): random and mutated JSON bodies for every endpoint that takes
//! one (chat completions, completions, embeddings, their render endpoints, tokenize, detokenize, the
//! Responses API, Anthropic's Messages API and its token count), streaming or not, with the
//! structured-output, tool and item fields and vLLM's own among the keys. None may get a 5xx, a panic or a
//! dropped connection: each answer is a success or an OpenAI- (or Anthropic-) style error, a
//! stream ends as its API ends one, and the server still answers at the end. A failing body is shrunk to a small one before it
//! is reported. `KILN_FUZZ_CASES` sets the count (default 3000); the seed is fixed.

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::*;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|sc, _| sc.max_body_bytes = 256 << 10))
}

const PATHS: [&str; 10] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/tokenize",
    "/detokenize",
    "/v1/chat/completions/render",
    "/v1/completions/render",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
];

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
    "logit_bias",
    "reasoning_content",
    "seed",
    "n",
    "stop",
    "ignore_eos",
    "stream",
    "stream_options",
    "logprobs",
    "top_logprobs",
    "echo",
    "prompt_logprobs",
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
    "input",
    "instructions",
    "max_output_tokens",
    "previous_response_id",
    "format",
    "call_id",
    "arguments",
    "output",
    "summary",
    "store",
    "system",
    "stop_sequences",
    "input_schema",
    "tool_use_id",
    "thinking",
    "id",
    "min_tokens",
    "stop_token_ids",
    "include_stop_str_in_output",
    "priority",
    "truncate_prompt_tokens",
    "allowed_token_ids",
    "bad_words",
    "continuous_usage_stats",
    "add_generation_prompt",
    "continue_final_message",
    "thinking_token_budget",
    "skip_special_tokens",
    "cache_salt",
    "background",
    "encoding_format",
    "dimensions",
];

/// A JSON scalar, biased to edge cases.
fn scalar() -> impl Strategy<Value = Value> {
    let edges = [
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
    ];
    let floats = [
        0.0f64, -0.0, 1e-30, 0.5, 1.0, 2.0, -1.0, 1e308, -1e308, 3.4e38, 1e39,
    ];
    let strings = [
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
        "{% for %}",
    ];
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        select(edges.to_vec()).prop_map(Value::from),
        Just(json!(u32::MAX as i64 + 1)),
        (-1000i64..1000).prop_map(Value::from),
        select(floats.to_vec()).prop_map(Value::from),
        (-5.0f64..5.0).prop_map(Value::from),
        select(strings.to_vec()).prop_map(Value::from),
        (0usize..3000).prop_map(|n| json!("x".repeat(n))),
        prop::collection::vec(0u32..400, 0..40).prop_map(|v| json!(v)),
        (1usize..3).prop_map(|n| json!(vec![u32::MAX; n])),
        (0u32..10).prop_map(Value::from),
    ]
}

/// A JSON value nested at most 3 deep: arrays, objects keyed by request fields, messages.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((select(FIELDS), inner.clone()), 0..4).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
            inner.prop_map(|c| json!([{"role": "user", "content": c}])),
        ]
    })
}

/// A valid body for `path`; half of the chat bodies ask for structured output (a JSON object or a
/// structural tag) or tools.
fn valid(path: &str, stream: bool, kind: u8) -> Value {
    match path {
        p if p.starts_with("/v1/chat/completions") => {
            let mut body = json!({"model": "tiny", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3, "temperature": 0, "stream": stream});
            match kind {
                0 => body["response_format"] = json!({"type": "json_object"}),
                1 => {
                    body["tools"] = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}]);
                    body["tool_choice"] = json!("required");
                }
                2 => {
                    body["response_format"] = json!({"type": "structural_tag", "triggers": ["<f="],
                        "structures": [{"begin": "<f=a>", "schema": {"type": "object"}, "end": "</f>"}]});
                }
                _ => {}
            }
            body
        }
        p if p.starts_with("/v1/completions") => {
            json!({"model": "tiny", "prompt": "once upon", "max_tokens": 3, "stream": stream})
        }
        "/v1/responses" => {
            let mut body = json!({"model": "tiny", "input": "hello there", "max_output_tokens": 3, "temperature": 0, "stream": stream});
            match kind {
                0 => body["text"] = json!({"format": {"type": "json_object"}}),
                1 => {
                    body["tools"] = json!([{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}]);
                    body["tool_choice"] = json!("required");
                }
                2 => {
                    body["input"] = json!([{"role": "user", "content": "hi"},
                        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                        {"type": "function_call_output", "call_id": "c1", "output": "1"}]);
                }
                _ => {}
            }
            body
        }
        p if p.starts_with("/v1/messages") => {
            let mut body = json!({"model": "tiny", "max_tokens": 3, "temperature": 0, "system": "Be brief.",
                "messages": [{"role": "user", "content": "hello there"}]});
            if p == "/v1/messages" {
                body["stream"] = json!(stream);
            }
            if kind == 1 {
                body["tools"] = json!([{"name": "f", "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}]);
                body["tool_choice"] = json!({"type": "any"});
            }
            body
        }
        "/tokenize" => json!({"model": "tiny", "prompt": "hello"}),
        _ => json!({"model": "tiny", "tokens": [1, 2, 3]}),
    }
}

/// How the bytes of a mutated body are mangled at the end.
#[derive(Debug, Clone)]
enum Mangle {
    None,
    Truncate(Index),
    Flip(Index, u8),
    Replace(Value),
}

/// A valid body for `path` with one to three fields removed or replaced by random values,
/// then perhaps its bytes mangled.
fn mutated(path: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let edit = (select(FIELDS), any::<bool>(), value());
    let mangle = prop_oneof![
        3 => Just(Mangle::None),
        1 => any::<Index>().prop_map(Mangle::Truncate),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mangle::Flip(i, b)),
        1 => value().prop_map(Mangle::Replace),
    ];
    let edits = prop::collection::vec(edit, 1..4);
    (any::<bool>(), 0u8..6, edits, -1i64..70, mangle).prop_map(
        move |(stream, kind, edits, big_n, mangle)| {
            let mut body = valid(path, stream, kind);
            let obj = body.as_object_mut().unwrap();
            for (key, remove, v) in edits {
                if remove {
                    obj.remove(key);
                } else {
                    obj.insert(key.into(), v);
                }
            }
            // Keep generations short where they are valid, so that the run stays bounded.
            for key in ["max_tokens", "max_output_tokens"] {
                if obj.get(key).and_then(Value::as_i64).is_some_and(|m| m > 16) {
                    obj.insert(key.into(), json!(16));
                }
            }
            if obj.get("n").and_then(Value::as_i64).is_some_and(|n| n > 4) {
                obj.insert("n".into(), json!(big_n));
                obj.insert("max_tokens".into(), json!(1));
            }
            let mut bytes = serde_json::to_vec(&body).unwrap();
            match mangle {
                Mangle::Truncate(i) if !bytes.is_empty() => bytes.truncate(i.index(bytes.len())),
                Mangle::Flip(i, b) if !bytes.is_empty() => {
                    let i = i.index(bytes.len());
                    bytes[i] = b;
                }
                Mangle::Replace(v) => bytes = serde_json::to_vec(&v).unwrap(),
                _ => {}
            }
            bytes
        },
    )
}

/// Sends one body; fails unless the answer is a success or an OpenAI-style error (never a
/// 5xx, a cut body or a stream without its end). Returns the status.
async fn check(path: &str, body: Vec<u8>) -> Result<u16, TestCaseError> {
    let base = server();
    let shown: String = String::from_utf8_lossy(&body).chars().take(400).collect();
    let fail = |what: String| TestCaseError::fail(format!("{path}: {what} for {shown}"));
    let r = (client().post(format!("{base}{path}")))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| fail(format!("no answer ({e})")))?;
    let status = r.status().as_u16();
    let ctype = (r.headers().get("content-type"))
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let text = r
        .text()
        .await
        .map_err(|e| fail(format!("body cut ({e})")))?;
    prop_assert!(status < 500, "{path}: {status} {text} for {shown}");
    if status >= 400 {
        let v: Value =
            serde_json::from_str(&text).map_err(|_| fail(format!("not JSON: {text}")))?;
        let e = &v["error"];
        prop_assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string(),
            "{path}: {v} for {shown}"
        );
    } else if ctype.starts_with("text/event-stream") {
        // How each API ends a stream, and how it would tell of a failure.
        let (end, failure): (&[&str], &str) = match path {
            "/v1/responses" => (
                &["\"response.completed\"", "\"response.incomplete\""],
                "event: error",
            ),
            "/v1/messages" => (&["\"message_stop\""], "event: error"),
            _ => (&["data: [DONE]"], "\"server_error\""),
        };
        let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
        prop_assert!(
            end.iter().any(|e| last.contains(e)),
            "{path}: {text} for {shown}"
        );
        prop_assert!(!text.contains(failure), "{path}: {text} for {shown}");
    }
    Ok(status)
}

#[test]
fn random_and_mutated_bodies_never_get_a_5xx() {
    let cases: u32 = std::env::var("KILN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[26; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let by_status = RefCell::new(BTreeMap::new());
    let bodies = (0..PATHS.len()).prop_flat_map(|i| (Just(PATHS[i]), mutated(PATHS[i])));
    let result = runner.run(&bodies, |(path, body)| {
        let status = rt.block_on(check(path, body))?;
        *by_status.borrow_mut().entry(status).or_insert(0u32) += 1;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let by_status = by_status.into_inner();
    eprintln!("fuzz: {cases} bodies, answers by status: {by_status:?}");
    let (s, _) = rt.block_on(get(server(), "/health"));
    assert_eq!(s, 200);
    assert!(
        by_status.get(&200).is_some_and(|&n| n > cases / 20),
        "too few valid bodies: {by_status:?}"
    );
}
