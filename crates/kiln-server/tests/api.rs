//! The OpenAI surface against the tiny random model: errors (status and shape, and the server
//! keeps answering), completions, stop strings, prefix caching, tokenize, metrics syntax.

mod common;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| {
        start_tiny(|sc, _| {
            sc.api_key = Some(API_KEY.into());
            sc.max_body_bytes = 64 << 10;
        })
    })
}

fn chat(content: &str, extra: Value) -> Value {
    let mut b = json!({"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

fn assert_error(status: u16, body: &Value, want_status: u16, want_type: &str, what: &str) {
    assert_eq!(status, want_status, "{what}: {body}");
    let e = &body["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    assert_eq!(e["type"], want_type, "{what}: {body}");
    assert!(
        e.get("param").is_some() && e.get("code").is_some(),
        "{what}: {body}"
    );
}

async fn still_answers(base: &str) {
    let (s, b) = post(base, "/v1/chat/completions", &chat("hello", json!({}))).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["choices"][0]["message"]["role"], "assistant");
}

#[tokio::test]
async fn malformed_inputs_get_openai_errors() {
    let base = server();
    let url = format!("{base}/v1/chat/completions");
    let raw = |body: &'static str| {
        let url = url.clone();
        async move {
            let r = client()
                .post(url)
                .bearer_auth(API_KEY)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (s, b) = raw("{\"model\": \"tiny\", \"messages\": [").await;
    assert_error(s, &b, 400, "invalid_request_error", "malformed JSON");
    still_answers(base).await;
    let (s, b) = raw("{\"model\": \"tiny\", \"messages\": \"hi\"}").await;
    assert_error(
        s,
        &b,
        400,
        "invalid_request_error",
        "messages of the wrong type",
    );
    still_answers(base).await;

    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "temperature of the wrong type",
            chat("x", json!({"temperature": "hot"})),
            400,
            "",
        ),
        (
            "max_tokens negative",
            chat("x", json!({"max_tokens": -3})),
            400,
            "max_tokens",
        ),
        (
            "max_tokens zero",
            chat("x", json!({"max_tokens": 0})),
            400,
            "max_tokens",
        ),
        (
            "empty messages",
            json!({"model": "tiny", "messages": []}),
            400,
            "messages",
        ),
        ("missing messages", json!({"model": "tiny"}), 400, ""),
        (
            "negative temperature",
            chat("x", json!({"temperature": -1.0})),
            400,
            "temperature",
        ),
        ("top_p zero", chat("x", json!({"top_p": 0.0})), 400, "top_p"),
        (
            "presence_penalty out of range",
            chat("x", json!({"presence_penalty": 5.0})),
            400,
            "presence_penalty",
        ),
        (
            "frequency_penalty out of range",
            chat("x", json!({"frequency_penalty": -3.0})),
            400,
            "frequency_penalty",
        ),
        (
            "min_p out of range",
            chat("x", json!({"min_p": 2.0})),
            400,
            "min_p",
        ),
        ("n zero", chat("x", json!({"n": 0})), 400, "n"),
        (
            "too many top_logprobs",
            chat("x", json!({"logprobs": true, "top_logprobs": 50})),
            400,
            "top_logprobs",
        ),
        (
            "over the context",
            chat("x", json!({"max_tokens": 100000})),
            400,
            "max_tokens",
        ),
        (
            "over the context (max_completion_tokens)",
            chat("x", json!({"max_completion_tokens": 600})),
            400,
            "max_tokens",
        ),
    ];
    for (what, body, status, param) in cases {
        let (s, b) = post(base, "/v1/chat/completions", &body).await;
        assert_error(s, &b, status, "invalid_request_error", what);
        if !param.is_empty() {
            assert_eq!(b["error"]["param"], param, "{what}: {b}");
        }
        still_answers(base).await;
    }

    let (s, b) = post(
        base,
        "/v1/chat/completions",
        &chat("x", json!({"model": "gpt-17"})),
    )
    .await;
    assert_error(s, &b, 404, "invalid_request_error", "unknown model");
    assert_eq!(b["error"]["code"], "model_not_found");
    let (s, b) = post(
        base,
        "/v1/completions",
        &json!({"model": "tiny", "prompt": [1, 2, 99999]}),
    )
    .await;
    assert_error(
        s,
        &b,
        400,
        "invalid_request_error",
        "token id out of the vocabulary",
    );
    let (s, b) = post(
        base,
        "/v1/completions",
        &json!({"model": "tiny", "prompt": {"a": 1}}),
    )
    .await;
    assert_error(
        s,
        &b,
        400,
        "invalid_request_error",
        "prompt of the wrong type",
    );
    let (s, b) = post(
        base,
        "/v1/completions",
        &json!({"model": "tiny", "prompt": "x".repeat(600)}),
    )
    .await;
    assert_error(
        s,
        &b,
        400,
        "invalid_request_error",
        "prompt longer than the context",
    );
    still_answers(base).await;

    // Body over the size limit.
    let big = chat(&"a".repeat(100 << 10), json!({}));
    let (s, b) = post(base, "/v1/chat/completions", &big).await;
    assert_error(s, &b, 413, "invalid_request_error", "body over the limit");
    still_answers(base).await;

    // API key: missing or wrong.
    for key in [None, Some("wrong")] {
        let mut r = client().post(&url).json(&chat("x", json!({})));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let r = r.send().await.unwrap();
        let s = r.status().as_u16();
        assert_error(
            s,
            &r.json().await.unwrap(),
            401,
            "invalid_request_error",
            "bad API key",
        );
    }
    // Anthropic clients send the key as `x-api-key`.
    for (key, status) in [("wrong", 401), (API_KEY, 200)] {
        let r = client()
            .post(&url)
            .header("x-api-key", key)
            .json(&chat("x", json!({})));
        assert_eq!(r.send().await.unwrap().status().as_u16(), status);
    }
    let r = client()
        .get(format!("{base}/v1/nope"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(r.json::<Value>().await.unwrap()["error"]["message"].is_string());
    still_answers(base).await;
}

#[tokio::test]
async fn queue_full_gets_503_with_retry_after() {
    let base = start_tiny(|sc, _| sc.max_waiting = 0);
    let r = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat("x", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert!(r.headers().get("retry-after").is_some());
    let b: Value = r.json().await.unwrap();
    assert!(b["error"]["message"].is_string());
    assert_eq!(get_text(&base, "/health").await, "");
}

#[tokio::test]
async fn completions_token_prompts_logprobs_and_usage() {
    let base = server();
    let body = json!({"model": "tiny", "prompt": [[10, 20, 30, 40], [50, 60]], "max_tokens": 3, "temperature": 0, "logprobs": 2, "ignore_eos": true});
    let (s, b) = post(base, "/v1/completions", &body).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["object"], "text_completion");
    assert_eq!(b["choices"].as_array().unwrap().len(), 2);
    for c in b["choices"].as_array().unwrap() {
        let lp = &c["logprobs"];
        assert_eq!(lp["tokens"].as_array().unwrap().len(), 3, "{b}");
        assert!(
            lp["token_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x.as_f64().unwrap() <= 0.0)
        );
        assert!(
            lp["top_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m.as_object().unwrap().len() <= 2 && !m.as_object().unwrap().is_empty())
        );
        assert_eq!(c["finish_reason"], "length");
    }
    assert_eq!(b["usage"]["prompt_tokens"], 6);
    assert_eq!(b["usage"]["completion_tokens"], 6);
    assert_eq!(b["usage"]["total_tokens"], 12);

    // n > 1 with sampling: n choices.
    let (s, b) = post(
        base,
        "/v1/chat/completions",
        &chat("hi", json!({"n": 3, "temperature": 1.0, "seed": 5})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["choices"].as_array().unwrap().len(), 3);
}

/// `echo`: each choice's text starts with its prompt (text as sent, token ids decoded), in
/// one body and in the stream's first chunk per choice (with logprobs: `prompt_logprobs.rs`).
#[tokio::test]
async fn completions_echo_the_prompt() {
    let base = server();
    let ids_text = {
        let body = json!({"model": "tiny", "tokens": [10, 20, 30]});
        let (_, t) = post(base, "/detokenize", &body).await;
        t["prompt"].as_str().unwrap().to_string()
    };
    assert!(!ids_text.is_empty());
    for (prompt, texts) in [
        (json!(["the cat", "a dog"]), ["the cat", "a dog"]),
        (json!([[10, 20, 30], [10, 20, 30]]), [&ids_text, &ids_text]),
    ] {
        let plain = json!({"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0, "ignore_eos": true, "n": 2});
        let (s, b) = post(base, "/v1/completions", &plain).await;
        assert_eq!(s, 200, "{b}");
        let mut echo = plain.clone();
        echo["echo"] = json!(true);
        let (s, e) = post(base, "/v1/completions", &echo).await;
        assert_eq!(s, 200, "{e}");
        for i in 0..4 {
            let want = format!(
                "{}{}",
                texts[i / 2],
                b["choices"][i]["text"].as_str().unwrap()
            );
            assert_eq!(e["choices"][i]["text"], want.as_str(), "choice {i}: {e}");
        }
        echo["stream"] = json!(true);
        let chunks = stream(base, "/v1/completions", &echo).await;
        for i in 0..4u64 {
            let text: String = (chunks.iter())
                .flat_map(|c| c["choices"].as_array().cloned().unwrap_or_default())
                .filter(|c| c["index"] == i)
                .filter_map(|c| c["text"].as_str().map(str::to_string))
                .collect();
            let want = e["choices"][i as usize]["text"].as_str().unwrap();
            assert_eq!(text, want, "streamed choice {i}");
        }
    }
}

#[tokio::test]
async fn stop_strings_are_cut_and_never_emitted() {
    let base = server();
    let body = json!({"model": "tiny", "prompt": "the cat sat on", "max_tokens": 24, "temperature": 0, "ignore_eos": true});
    let (_, b) = post(base, "/v1/completions", &body).await;
    let full = b["choices"][0]["text"].as_str().unwrap().to_string();
    let chars: Vec<char> = full.chars().collect();
    assert!(
        chars.len() >= 6,
        "output too short to test stop strings: {full:?}"
    );
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let want = &full[..full.find(&stop).unwrap()];
    let mut with_stop = body.clone();
    with_stop["stop"] = json!([stop, "\u{1}never"]);
    let (_, b) = post(base, "/v1/completions", &with_stop).await;
    assert_eq!(
        b["choices"][0]["text"], want,
        "full {full:?}, stop {stop:?}"
    );
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
    with_stop["stream"] = json!(true);
    let chunks = stream(base, "/v1/completions", &with_stop).await;
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, want);
}

#[tokio::test]
async fn unset_knobs_take_the_model_generation_config() {
    let body = |seed: u64, temperature: Option<f32>| {
        let mut b = json!({"model": "tiny", "prompt": "the cat sat on", "max_tokens": 12, "ignore_eos": true, "seed": seed});
        if let Some(t) = temperature {
            b["temperature"] = json!(t);
        }
        b
    };
    let text = |b: Value| b["choices"][0]["text"].as_str().unwrap().to_string();
    // Without a generation config kiln samples at temperature 1: the seed changes the text.
    let base = server();
    let (a, b) = (
        text(post(base, "/v1/completions", &body(1, None)).await.1),
        text(post(base, "/v1/completions", &body(2, None)).await.1),
    );
    assert_ne!(a, b, "temperature 1 should depend on the seed");
    let greedy = text(post(base, "/v1/completions", &body(1, Some(0.0))).await.1);
    // A model whose generation config says greedy: unset temperature means 0.
    let tc = kiln_model::testing::TinyConfig {
        generation: kiln_model::GenerationDefaults {
            temperature: Some(0.0),
            ..Default::default()
        },
        ..Default::default()
    };
    let base = start_tiny_model(&tc);
    for seed in [1, 2] {
        let (s, b) = post(&base, "/v1/completions", &body(seed, None)).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(text(b), greedy, "seed {seed}");
    }
    // An explicit knob still wins over the model's.
    let (_, explicit) = post(&base, "/v1/completions", &body(2, Some(1.0))).await;
    assert_eq!(text(explicit), b, "same weights, seed and temperature 1");
}

#[tokio::test]
async fn shared_prefix_hits_the_prefix_cache() {
    let base = server();
    let prefix =
        "You are a helpful assistant. Here is a long shared document about kilns and pottery. "
            .repeat(3);
    let (s, first) = post(
        base,
        "/v1/chat/completions",
        &chat(&format!("{prefix} Question one?"), json!({"max_tokens": 2})),
    )
    .await;
    assert_eq!(s, 200, "{first}");
    assert!(first["usage"]["prompt_tokens"].as_u64().unwrap() > 64);
    let (_, second) = post(
        base,
        "/v1/chat/completions",
        &chat(
            &format!("{prefix} Another question?"),
            json!({"max_tokens": 2}),
        ),
    )
    .await;
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached >= 32, "{second}");
}

#[tokio::test]
async fn cache_salt_isolates_the_prefix_cache() {
    let base = server();
    let prompt =
        "A document only tenants with the same salt may share: kilns, glazes, cones. ".repeat(3);
    let ask = |salt: Option<&str>| {
        let mut extra = json!({"max_tokens": 1});
        if let Some(s) = salt {
            extra["cache_salt"] = json!(s);
        }
        chat(&prompt, extra)
    };
    let cached = |r: &Value| r["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64();
    let (s, r) = post(base, "/v1/chat/completions", &ask(Some("tenant-a"))).await;
    assert_eq!((s, cached(&r)), (200, Some(0)), "{r}");
    // Same prompt, another salt or none: nothing shared.
    let (_, r) = post(base, "/v1/chat/completions", &ask(Some("tenant-b"))).await;
    assert_eq!(cached(&r), Some(0), "{r}");
    let (_, r) = post(base, "/v1/chat/completions", &ask(None)).await;
    assert_eq!(cached(&r), Some(0), "{r}");
    // Same salt: the prompt's full blocks are found.
    let (_, r) = post(base, "/v1/chat/completions", &ask(Some("tenant-a"))).await;
    assert!(cached(&r).unwrap() >= 32, "{r}");
    let (s, r) = post(base, "/v1/chat/completions", &ask(Some(""))).await;
    assert_eq!(
        (s, r["error"]["param"].as_str()),
        (400, Some("cache_salt")),
        "{r}"
    );
}

#[tokio::test]
async fn streaming_chat_usage_models_tokenize() {
    let base = server();
    let chunks = stream(base, "/v1/chat/completions", &chat("hi", json!({"stream": true, "stream_options": {"include_usage": true}, "max_tokens": 5, "ignore_eos": true}))).await;
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"].as_array().unwrap().len(), 0);
    assert_eq!(last["usage"]["completion_tokens"], 5);
    let fin: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null() && c["choices"].get(0).is_some())
        .collect();
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0]["choices"][0]["finish_reason"], "length");

    let models: Value = serde_json::from_str(&get_text(base, "/v1/models").await).unwrap();
    assert_eq!(models["data"][0]["id"], "tiny");
    let (s, t) = post(base, "/tokenize", &json!({"prompt": "hello there"})).await;
    assert_eq!(s, 200);
    let (s, d) = post(base, "/detokenize", &json!({"tokens": t["tokens"]})).await;
    assert_eq!(s, 200);
    assert!(
        d["prompt"].as_str().unwrap().ends_with("hello there"),
        "{d}"
    );
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let base = server();
    still_answers(base).await;
    let text = get_text(base, "/metrics").await;
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (kw, name, tail) = (
                p.next().unwrap(),
                p.next().unwrap_or(""),
                p.next().unwrap_or(""),
            );
            assert!(valid_name(name), "{line}");
            match kw {
                "HELP" => assert!(!tail.is_empty(), "{line}"),
                "TYPE" => assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&tail),
                    "{line}"
                ),
                _ => panic!("bad comment line {line}"),
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "{line}"
        );
        let name = match series.split_once('{') {
            Some((n, labels)) => {
                let labels = labels.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                for l in labels.split(',') {
                    let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    assert!(
                        valid_name(k) && v.starts_with('"') && v.ends_with('"') && v.len() >= 2,
                        "{line}"
                    );
                }
                n
            }
            None => series,
        };
        assert!(valid_name(name), "{line}");
    }
    for name in [
        "kiln_num_requests_running",
        "kiln_num_requests_waiting",
        "kiln_kv_blocks_used",
        "kiln_kv_blocks_free",
        "kiln_kv_blocks_cached",
        "kiln_prefix_cache_queries_total",
        "kiln_prefix_cache_hits_total",
        "kiln_num_preemptions_total",
        "kiln_kv_blocks_window_released_total",
        "kiln_cpu_blocks_stored_total",
        "kiln_cpu_blocks_restored_total",
        "kiln_generation_tokens_total",
        "kiln_time_to_first_token_seconds_count",
        "kiln_time_per_output_token_seconds_count",
    ] {
        metric(&text, name);
    }
    assert!(metric(&text, "kiln_generation_tokens_total") > 0.0);
    assert!(metric(&text, "kiln_time_to_first_token_seconds_count") > 0.0);
    assert!(text.contains("kiln_request_success_total{finished_reason=\"length\"}"));
}
