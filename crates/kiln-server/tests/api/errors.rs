//! OpenAI-shaped errors (status and shape) for malformed and out-of-range requests, unknown
//! models, bad keys, oversized bodies and a full queue, with the server still answering.

use super::*;

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
            "a stream option kiln does not serve",
            chat(
                "x",
                json!({"stream": true, "stream_options": {"usage_every": 2}}),
            ),
            400,
            "",
        ),
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
