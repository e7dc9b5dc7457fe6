//! Failures never take the server down (fault injection on the tiny random model): a failed
//! step fails only its requests, a lost device or an engine panic fails the requests in
//! flight and the engine is rebuilt, `/health` says 503 with the reason meanwhile and while
//! draining for shutdown, and a shutdown lets running requests finish.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use kiln_engine::FaultPlan;
use serde_json::{Value, json};

fn chat(content: &str, max_tokens: usize, stream: bool) -> Value {
    json!({
        "model": "tiny", "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens, "temperature": 0, "ignore_eos": true, "stream": stream,
    })
}

async fn wait_healthy(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (s, body) = get(base, "/health").await;
        if s == 200 {
            return;
        }
        assert_eq!(s, 503, "{body}");
        assert!(Instant::now() < deadline, "not healthy again: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn assert_pool_empty(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = get_text(base, "/metrics").await;
        if metric(&m, "kiln_kv_blocks_used") == 0.0
            && metric(&m, "kiln_num_requests_running") == 0.0
        {
            return;
        }
        assert!(Instant::now() < deadline, "blocks leaked: {m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_fails_its_requests_and_the_server_goes_on() {
    // One request alone: step 1 is its prefill, steps 2.. its decodes.
    let srv = start_tiny_faulty(
        |_, _| {},
        |_| FaultPlan {
            fail_steps: vec![3],
            ..FaultPlan::default()
        },
    );
    let base = &srv.base;
    let (s, b) = post(base, "/v1/chat/completions", &chat("first", 6, false)).await;
    assert_eq!(s, 500, "{b}");
    let msg = b["error"]["message"].as_str().unwrap();
    assert!(msg.contains("injected failure of step 3"), "{msg}");
    assert_eq!(b["error"]["type"], "server_error");
    assert_pool_empty(base).await;
    let (s, _) = get(base, "/health").await;
    assert_eq!(s, 200);
    let (s, b) = post(base, "/v1/chat/completions", &chat("second", 6, false)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["usage"]["completion_tokens"], 6);
    let m = get_text(base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_step_failures_total"), 1.0, "{m}");
    assert_eq!(metric(&m, "kiln_up"), 1.0);
    assert_eq!(metric(&m, "kiln_engine_restarts_total"), 0.0);
}

async fn lost_and_rebuilt(plan: FaultPlan, expect: &str) {
    let srv = start_tiny_faulty(
        |_, _| {},
        move |build| {
            if build == 0 {
                plan.clone()
            } else {
                FaultPlan::default()
            }
        },
    );
    let base = &srv.base;
    // Steps 1-4: a reference answer before the fault.
    let (s, before) = post(
        base,
        "/v1/chat/completions",
        &chat("same question", 4, false),
    )
    .await;
    assert_eq!(s, 200, "{before}");
    // Steps 5..: a streamed request that is in flight when the fault comes (at step 7).
    let (s, events) = stream_raw(base, "/v1/chat/completions", &chat("in flight", 20, true)).await;
    assert_eq!(s, 200);
    let err: Value = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .find(|v| v.get("error").is_some())
        .expect("an error event");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(msg.contains(expect), "{msg}");
    assert_eq!(events.last().unwrap(), "[DONE]");
    wait_healthy(base).await;
    let (s, after) = post(
        base,
        "/v1/chat/completions",
        &chat("same question", 4, false),
    )
    .await;
    assert_eq!(s, 200, "{after}");
    assert_eq!(
        after["choices"][0]["message"]["content"],
        before["choices"][0]["message"]["content"]
    );
    let m = get_text(base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_engine_restarts_total"), 1.0, "{m}");
    assert_eq!(metric(&m, "kiln_up"), 1.0);
    assert_pool_empty(base).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_device_fails_requests_in_flight_and_the_engine_is_rebuilt() {
    lost_and_rebuilt(
        FaultPlan {
            lose_device_at: Some(7),
            ..FaultPlan::default()
        },
        "the GPU device was lost (injected device loss at step 7)",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_panic_is_contained_like_a_lost_device() {
    lost_and_rebuilt(
        FaultPlan {
            panic_at: Some(7),
            ..FaultPlan::default()
        },
        "the engine panicked: injected panic at step 7",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_503_with_the_reason_while_the_engine_rebuilds() {
    // The rebuild is slowed down so that the window is wide enough to observe.
    let srv = start_tiny_faulty(
        |_, _| {},
        |build| {
            if build == 1 {
                std::thread::sleep(Duration::from_secs(2));
            }
            FaultPlan {
                lose_device_at: (build == 0).then_some(2),
                ..FaultPlan::default()
            }
        },
    );
    let base = &srv.base;
    let (s, b) = post(base, "/v1/chat/completions", &chat("x", 5, false)).await;
    assert_eq!(s, 500, "{b}");
    let (s, body) = get(base, "/health").await;
    assert_eq!(s, 503, "{body}");
    assert!(
        body.contains("the GPU device was lost") && body.contains("restarting"),
        "{body}"
    );
    let m = get_text(base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_up"), 0.0);
    let (s, b) = post(base, "/v1/chat/completions", &chat("y", 5, false)).await;
    assert_eq!(s, 503, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("restarting"),
        "{b}"
    );
    wait_healthy(base).await;
    let (s, b) = post(base, "/v1/chat/completions", &chat("y", 5, false)).await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_running_requests_then_stops() {
    let srv = start_tiny_faulty(|_, _| {}, |_| FaultPlan::default());
    let base = srv.base.clone();
    let r = client()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .json(&chat("long", 300, true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut body = r.bytes_stream();
    let mut text = String::new();
    while !text.contains("\"content\"") {
        text += &String::from_utf8_lossy(&body.next().await.unwrap().unwrap());
    }
    srv.shutdown.shutdown();
    // Readiness turns at once; new requests are refused; the running one goes on.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (s, b) = get(&base, "/health").await;
        if s == 503 {
            assert!(b.contains("shutting down"), "{b}");
            break;
        }
        assert!(Instant::now() < deadline, "/health did not turn 503");
    }
    let (s, b) = post(&base, "/v1/chat/completions", &chat("new", 2, false)).await;
    assert_eq!(s, 503, "{b}");
    while let Some(chunk) = body.next().await {
        text += &String::from_utf8_lossy(&chunk.unwrap());
    }
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(!text.contains("\"error\""), "{text}");
    assert!(text.contains("\"finish_reason\":\"length\""), "{text}");
    let stopped = srv
        .stopped
        .recv_timeout(Duration::from_secs(30))
        .expect("the server did not stop");
    assert_eq!(stopped, "Ok(())");
}
