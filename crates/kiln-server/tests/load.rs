//! Concurrency and cancellation against the tiny random model: 32 concurrent streams equal
//! the same requests sent alone; a client that disconnects mid-stream frees its blocks.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use serde_json::json;

fn request(i: usize) -> serde_json::Value {
    json!({
        "model": "tiny",
        "messages": [{"role": "user", "content": format!("request number {i}: tell me about {}", "kilns ".repeat(i % 5))}],
        "max_tokens": 8, "temperature": 0, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": true},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_streams_match_requests_sent_alone() {
    let base = start_tiny(|_, _| {});
    let mut alone = Vec::new();
    for i in 0..32 {
        let chunks = stream(&base, "/v1/chat/completions", &request(i)).await;
        assert_eq!(
            chunks.last().unwrap()["usage"]["completion_tokens"],
            8,
            "{chunks:?}"
        );
        alone.push(chat_text(&chunks));
    }
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let base = base.clone();
            tokio::spawn(async move { stream(&base, "/v1/chat/completions", &request(i)).await })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let chunks = t.await.unwrap();
        assert_eq!(
            chunks.last().unwrap()["usage"]["completion_tokens"],
            8,
            "request {i}"
        );
        assert_eq!(chat_text(&chunks), alone[i], "request {i}");
    }
    let m = get_text(&base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_num_requests_running"), 0.0);
    assert_eq!(metric(&m, "kiln_kv_blocks_used"), 0.0);
    assert_eq!(metric(&m, "kiln_penalty_pages_used"), 0.0);
    assert!(metric(&m, "kiln_penalty_pages_total") > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_mid_stream_frees_blocks() {
    let base = start_tiny(|_, _| {});
    let max_tokens = 450;
    let body = json!({
        "model": "tiny", "messages": [{"role": "user", "content": "go on forever"}],
        "max_tokens": max_tokens, "temperature": 0, "ignore_eos": true, "stream": true,
    });
    let r = send(&base, "/v1/chat/completions", &body).await;
    assert_eq!(r.status().as_u16(), 200);
    let mut s = r.bytes_stream();
    let mut seen = String::new();
    while seen.matches("\"content\"").count() < 3 {
        seen += &String::from_utf8_lossy(&s.next().await.unwrap().unwrap());
    }
    let m = get_text(&base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_num_requests_running"), 1.0, "{m}");
    assert!(metric(&m, "kiln_kv_blocks_used") > 0.0);
    drop(s);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = get_text(&base, "/metrics").await;
        if metric(&m, "kiln_num_requests_running") == 0.0
            && metric(&m, "kiln_kv_blocks_used") == 0.0
        {
            assert!(
                metric(&m, "kiln_generation_tokens_total") < max_tokens as f64,
                "it ran to the end instead: {m}"
            );
            assert!(
                m.contains("kiln_request_success_total{finished_reason=\"abort\"} 1"),
                "{m}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "blocks not freed: {m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The server still serves.
    let (status, _) = post(
        &base,
        "/v1/chat/completions",
        &json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200);
}
