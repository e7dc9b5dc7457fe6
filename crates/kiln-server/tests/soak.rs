//! A bounded soak test (under a minute on lavapipe with the tiny random model): 64 concurrent
//! streaming clients with mixed prompt and output lengths against a KV pool small enough to
//! force preemption, with random client disconnects, injected step failures and one device
//! loss. Every request not hit by a fault must complete with the greedy output of its solo
//! run; every one hit must get a clear error; the pool must end empty and `/health` 200.
//! Four rounds of 64 clients by default: step failures throughout, the device
//! lost once half of the first round has ended; `KILN_SOAK_ROUNDS` sets more rounds, and
//! `KILN_SOAK_MODEL` a model file to run instead of the tiny model (the longer run with the
//! default model recorded in BENCHMARKS.md).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use kiln_engine::{FaultPlan, KvSize};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const CLIENTS: usize = 64;

/// A server for the soak's model: `KILN_SOAK_MODEL`'s file, or the tiny random model.
fn start_soak(
    tweak: impl FnOnce(&mut kiln_server::ServerConfig, &mut kiln_engine::EngineConfig),
    plan: impl Fn(usize) -> FaultPlan + Send + 'static,
) -> TinyServer {
    match std::env::var_os("KILN_SOAK_MODEL") {
        Some(p) => start_file_faulty(std::path::Path::new(&p), tweak, plan),
        None => start_tiny_faulty(tweak, plan),
    }
}

fn body(i: usize) -> Value {
    // Prompts of about 5 to 150 tokens, outputs of 4 to 120.
    let words = ["kiln", "fire", "clay", "glaze", "pot", "heat", "ash"];
    let prompt: Vec<&str> = (0..1 + (i * 37) % 60)
        .map(|k| words[(i + k) % words.len()])
        .collect();
    json!({
        "model": "tiny", "messages": [{"role": "user", "content": format!("{i}: {}", prompt.join(" "))}],
        "max_tokens": 4 + (i * 53) % 117, "temperature": 0, "ignore_eos": true, "stream": true,
    })
}

enum Outcome {
    Done(String),
    Failed(String),
    Disconnected,
}

/// Streams request `i`; drops the connection after `drop_after` chunks when set.
async fn client_run(base: String, i: usize, drop_after: Option<usize>) -> Outcome {
    let r = client()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .json(&body(i))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    if status != 200 {
        let b: Value = r.json().await.unwrap();
        assert_eq!(status, 503, "request {i}: {b}");
        return Outcome::Failed(b["error"]["message"].as_str().unwrap().to_string());
    }
    let mut s = r.bytes_stream();
    let mut raw = String::new();
    let mut chunks = 0;
    while let Some(c) = s.next().await {
        raw += &String::from_utf8_lossy(&c.unwrap());
        chunks = raw.matches("\n\n").count();
        if drop_after.is_some_and(|n| chunks >= n) {
            return Outcome::Disconnected;
        }
    }
    let mut text = String::new();
    for ev in raw.split("\n\n").filter(|e| !e.trim().is_empty()) {
        let data = ev.strip_prefix("data: ").unwrap();
        if data == "[DONE]" {
            continue;
        }
        let v: Value = serde_json::from_str(data).unwrap();
        if let Some(e) = v.get("error") {
            let msg = e["message"].as_str().unwrap().to_string();
            assert!(!msg.is_empty());
            return Outcome::Failed(msg);
        }
        if let Some(t) = v["choices"][0]["delta"]["content"].as_str() {
            text += t;
        }
    }
    assert!(
        raw.trim_end().ends_with("data: [DONE]"),
        "request {i} after {chunks} chunks: {raw}"
    );
    Outcome::Done(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_64_streaming_clients_with_faults() {
    let started = Instant::now();
    let rounds: usize = std::env::var("KILN_SOAK_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    // Solo runs, on a fault-free server with a large pool.
    let solo_srv = start_soak(|_, _| {}, |_| FaultPlan::default());
    let mut solo = Vec::new();
    for i in 0..CLIENTS {
        match client_run(solo_srv.base.clone(), i, None).await {
            Outcome::Done(t) => solo.push(t),
            _ => panic!("solo run {i} failed"),
        }
    }
    eprintln!("solo runs: {:.1} s", started.elapsed().as_secs_f64());

    // The soak server: 40 blocks (640 tokens) for 64 clients of up to ~270 tokens each.
    let lose = Arc::new(AtomicBool::new(false));
    let trigger = lose.clone();
    let srv = start_soak(
        |_, ec| {
            ec.kv = KvSize::Blocks(40);
            ec.max_model_len = Some(512);
        },
        move |build| match build {
            0 => FaultPlan {
                fail_steps: vec![20, 70],
                lose_device_now: Some(trigger.clone()),
                ..FaultPlan::default()
            },
            // After the rebuild: a step failure every 150 steps.
            _ => FaultPlan {
                fail_steps: (0..1000).map(|k| 40 + 150 * k).collect(),
                ..FaultPlan::default()
            },
        },
    );
    let base = srv.base.clone();
    // Preemptions are counted per engine (a rebuild starts at 0): keep the largest value seen.
    let most_preemptions = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (base, most) = (base.clone(), most_preemptions.clone());
        tokio::spawn(async move {
            loop {
                let (s, m) = get(&base, "/metrics").await;
                if s == 200 {
                    most.fetch_max(
                        metric(&m, "kiln_num_preemptions_total") as usize,
                        Ordering::Relaxed,
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let ended = Arc::new(AtomicUsize::new(0));
    let mut rng = rand::rngs::StdRng::seed_from_u64(10);
    let (mut done, mut failed, mut disconnected, mut sent) = (0, 0, 0, 0);
    for round in 0..rounds {
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let drop_after = (rng.random_range(0..8) == 0).then(|| rng.random_range(1..6));
                let (base, ended, lose) = (base.clone(), ended.clone(), lose.clone());
                tokio::spawn(async move {
                    let outcome = client_run(base, i, drop_after).await;
                    if ended.fetch_add(1, Ordering::SeqCst) + 1 == CLIENTS / 2 {
                        lose.store(true, Ordering::SeqCst); // half of the first round is over
                    }
                    (i, outcome)
                })
            })
            .collect();
        sent += tasks.len();
        for t in tasks {
            let (i, outcome) = t.await.unwrap();
            match outcome {
                Outcome::Done(text) => {
                    assert_eq!(
                        text, solo[i],
                        "round {round}, request {i}: output differs from its solo run"
                    );
                    done += 1;
                }
                Outcome::Failed(msg) => {
                    assert!(
                        msg.contains("injected") || msg.contains("restarting"),
                        "request {i}: unclear error {msg}"
                    );
                    failed += 1;
                }
                Outcome::Disconnected => disconnected += 1,
            }
        }
        // Between rounds the engine may be rebuilding: wait until it serves again.
        let deadline = Instant::now() + Duration::from_secs(120);
        while get(&base, "/health").await.0 != 200 {
            assert!(Instant::now() < deadline, "not healthy after round {round}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // The pool returns to empty; the server is up.
    let deadline = Instant::now() + Duration::from_secs(30);
    let m = loop {
        let m = get_text(&base, "/metrics").await;
        if metric(&m, "kiln_kv_blocks_used") == 0.0
            && metric(&m, "kiln_num_requests_running") == 0.0
            && metric(&m, "kiln_num_requests_waiting") == 0.0
        {
            break m;
        }
        assert!(Instant::now() < deadline, "KV blocks leaked: {m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(get(&base, "/health").await.0, 200);
    let restarts = metric(&m, "kiln_engine_restarts_total");
    let step_failures = metric(&m, "kiln_step_failures_total");
    sampler.abort();
    let preemptions = most_preemptions.load(Ordering::Relaxed);
    eprintln!(
        "soak: {rounds} rounds, {sent} requests: {done} completed equal to solo, {failed} failed by faults, {disconnected} disconnected; {step_failures} failed steps, {restarts} engine rebuilds, {preemptions} preemptions (most in one engine); {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(done + failed + disconnected, sent, "requests lost");
    assert!(
        failed > 0 && disconnected > 0 && done > CLIENTS / 2,
        "the faults did not bite as planned"
    );
    assert_eq!(restarts, 1.0, "{m}");
    assert!(step_failures >= 3.0, "{m}");
    assert!(preemptions > 0, "no preemption: {m}");
}
