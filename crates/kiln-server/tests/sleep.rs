//! Sleep mode through the server: `POST /sleep` drops the engine (its GPU memory given back)
//! while the server stays up, a request wakes it and gets the reply it got before, its
//! prompt's blocks read back from the disk tier; `/wake_up` and `/is_sleeping`; a busy engine
//! refuses to sleep (409); an idle one sleeps by itself after `sleep_after_idle`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kiln_engine::disk_tier::DiskTierConfig;
use serde_json::Value;

/// 150 prompt tokens: 9 full blocks (144 tokens) reach the disk.
fn prompt(tag: u32) -> Vec<u32> {
    (0..150).map(|i| 3 + (i * 11 + tag * 17) % 290).collect()
}

/// `POST path` without a body: the status and the body's text.
async fn post_empty(base: &str, path: &str) -> (u16, String) {
    let r = (client().post(format!("{base}{path}")))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn sleeping(base: &str) -> bool {
    let (s, body) = get(base, "/is_sleeping").await;
    assert_eq!(s, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["is_sleeping"].as_bool().unwrap()
}

/// Waits until metric `name` is `at_least`.
async fn wait_metric(base: &str, name: &str, at_least: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = metric(&get_text(base, "/metrics").await, name);
        if v >= at_least {
            return;
        }
        assert!(Instant::now() < deadline, "{name} stayed at {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_sleeps_and_wakes_with_its_disk_cache() {
    let dir = tempfile::tempdir().unwrap();
    let disk = DiskTierConfig {
        dir: dir.path().to_path_buf(),
        max_bytes: 1 << 30,
        model_id: "tiny, seed 7".into(),
    };
    let base = start_tiny(|sc, ec| {
        sc.sleep_mode = true;
        sc.kv_disk = Some(disk);
        ec.cpu_kv_bytes = 64 << 20;
    });
    assert!(!sleeping(&base).await);
    let (text, cached) = greedy_completion(&base, &prompt(1), 8).await;
    assert_eq!(cached, 0);

    for bad in ["/sleep?level=3", "/sleep?levels=1"] {
        let (s, body) = post_empty(&base, bad).await;
        assert_eq!(s, 400, "{bad}: {body}");
    }
    assert_eq!(post_empty(&base, "/sleep?level=1").await.0, 200);
    assert!(sleeping(&base).await);
    let m = get_text(&base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_engine_sleeping"), 1.0);
    assert_eq!(metric(&m, "kiln_engine_sleeps_total"), 1.0);
    assert_eq!(get(&base, "/health").await.0, 200, "asleep, not down");
    assert_eq!(
        post_empty(&base, "/sleep?level=2").await.0,
        200,
        "asleep already"
    );

    // A request wakes it: the same reply, its prompt's blocks read back from disk.
    let (again, cached) = greedy_completion(&base, &prompt(1), 8).await;
    assert_eq!(again, text);
    assert!(cached >= 144, "{cached} prompt tokens from the cache");
    assert!(!sleeping(&base).await);

    // `/wake_up`, with vLLM's tags (both woken together).
    assert_eq!(post_empty(&base, "/sleep").await.0, 200);
    let (s, body) = post_empty(&base, "/wake_up?tags=everything").await;
    assert_eq!(s, 400, "{body}");
    assert!(sleeping(&base).await, "a refused wake_up wakes nothing");
    assert_eq!(post_empty(&base, "/wake_up?tags=weights").await.0, 200);
    assert!(!sleeping(&base).await);
    assert_eq!(post_empty(&base, "/wake_up").await.0, 200, "awake already");

    // A request running: the engine does not sleep under it.
    let long = {
        let base = base.clone();
        tokio::spawn(async move { greedy_completion(&base, &prompt(2), 350).await })
    };
    wait_metric(&base, "kiln_num_requests_running", 1.0).await;
    let (s, body) = post_empty(&base, "/sleep").await;
    assert_eq!(s, 409, "{body}");
    assert!(body.contains("running or waiting"), "{body}");
    long.await.unwrap();
    assert!(!sleeping(&base).await);
    let m = get_text(&base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_engine_restarts_total"), 0.0);
    assert_eq!(metric(&m, "kiln_engine_sleeps_total"), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_engine_sleeps_and_the_next_request_wakes_it() {
    let base = start_tiny(|sc, _| sc.sleep_after_idle = Some(Duration::from_millis(300)));
    let (text, _) = greedy_completion(&base, &prompt(3), 8).await;
    wait_metric(&base, "kiln_engine_sleeping", 1.0).await;
    let (again, _) = greedy_completion(&base, &prompt(3), 8).await;
    assert_eq!(again, text);
    wait_metric(&base, "kiln_engine_sleeps_total", 2.0).await;
    // Without sleep mode there are no routes for it.
    assert_eq!(post_empty(&base, "/sleep").await.0, 404);
    assert_eq!(get(&base, "/is_sleeping").await.0, 404);
}
