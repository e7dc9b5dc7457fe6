//! The streamed chat (role, one finish reason, the usage chunk), `/v1/models` (with an alias
//! of the served model), and the
//! `/tokenize` / `/detokenize` round trip.

use super::*;

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
    let ids: Vec<&str> = (models["data"].as_array().unwrap().iter())
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["tiny", "tiny-alias"]);
    // An alias (a further --served-model-name) serves the model; replies give its first name.
    let (s, r) = post(
        base,
        "/v1/chat/completions",
        &json!({"model": "tiny-alias",
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    )
    .await;
    assert_eq!((s, r["model"].as_str()), (200, Some("tiny")), "{r}");
    // X-Request-Id: the client's sent back, or one made for a request without it.
    let r = (client()
        .get(format!("{base}/version"))
        .header("x-request-id", "trace-7"))
    .send()
    .await
    .unwrap();
    assert_eq!(r.headers()["x-request-id"], "trace-7");
    let r = client().get(format!("{base}/health")).send().await.unwrap();
    let made = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(
        made.len() == 32 && made.bytes().all(|b| b.is_ascii_hexdigit()),
        "{made}"
    );
    let version: Value = serde_json::from_str(&get_text(base, "/version").await).unwrap();
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    let card: Value = serde_json::from_str(&get_text(base, "/v1/models/tiny-alias").await).unwrap();
    assert_eq!(card["id"], "tiny-alias");
    let (s, _) = post(
        base,
        "/v1/chat/completions",
        &json!({"model": "tiny-other",
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    )
    .await;
    assert_eq!(s, 404);
    let (s, t) = post(base, "/tokenize", &json!({"prompt": "hello there"})).await;
    assert_eq!(s, 200);
    let (s, d) = post(base, "/detokenize", &json!({"tokens": t["tokens"]})).await;
    assert_eq!(s, 200);
    assert!(
        d["prompt"].as_str().unwrap().ends_with("hello there"),
        "{d}"
    );
}

/// CORS: a page of an allowed origin may call the API from a browser (its preflight answered
/// without the API key); another origin, or a server that allows none, gets no CORS headers.
#[tokio::test]
async fn allowed_origins_get_cors_headers() {
    let preflight = |base: &str, origin: &str| {
        client()
            .request(
                reqwest::Method::OPTIONS,
                format!("{base}/v1/chat/completions"),
            )
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    let allowed = |r: &reqwest::Response| {
        (r.headers().get("access-control-allow-origin")).map(|v| v.to_str().unwrap().to_string())
    };
    let r = preflight(server(), "http://page.test").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(allowed(&r).as_deref(), Some("http://page.test"));
    let methods = r.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(
        methods.contains('*') || methods.contains("POST"),
        "{methods}"
    );
    let r = (client().get(format!("{}/v1/models", server())))
        .bearer_auth(API_KEY)
        .header("origin", "http://page.test")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&r).as_deref(), Some("http://page.test"));
    let r = preflight(server(), "http://other.test").await.unwrap();
    assert_eq!(allowed(&r), None);
    let closed = start_tiny(|_, _| {});
    let r = preflight(&closed, "http://page.test").await.unwrap();
    assert_eq!(allowed(&r), None);
}
