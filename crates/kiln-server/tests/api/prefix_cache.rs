//! Prefix caching: a shared prompt prefix is found again, and `cache_salt` keeps tenants apart.

use super::*;

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
    refused(base, "/v1/chat/completions", &ask(Some("")), "cache_salt").await;
}
