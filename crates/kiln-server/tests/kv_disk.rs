//! The KV disk tier through the server: a prompt's blocks written by one server (at the
//! latest as it shuts down) are read back by the next one started on the same folder, and by the same
//! server once its engine is rebuilt after a lost device, and by a server sharing the folder;
//! the reply is the same, usage counts the prompt tokens they served, and the metrics count
//! the blocks.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use kiln_engine::FaultPlan;
use kiln_engine::disk_tier::DiskTierConfig;
use serde_json::json;

/// 150 prompt tokens: 9 full blocks (144 tokens) reach the disk.
fn prompt(tag: u32) -> Vec<u32> {
    (0..150).map(|i| 3 + (i * 11 + tag * 17) % 290).collect()
}

fn on_disk(
    dir: &Path,
) -> impl FnOnce(&mut kiln_server::ServerConfig, &mut kiln_engine::EngineConfig) {
    let dir = dir.to_path_buf();
    move |sc, ec| {
        sc.api_key = Some(API_KEY.into());
        sc.kv_disk = Some(DiskTierConfig {
            dir,
            max_bytes: 1 << 30,
            model_id: "tiny, seed 7".into(),
        });
        ec.cpu_kv_bytes = 64 << 20;
    }
}

/// Waits until `name` reaches `at_least` (blocks are written while the engine idles).
async fn wait_metric(base: &str, name: &str, at_least: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = metric(&get_text(base, "/metrics").await, name);
        if v >= at_least {
            return v;
        }
        assert!(Instant::now() < deadline, "{name} stayed at {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_written_by_one_server_serve_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let first = start_tiny_faulty(on_disk(dir.path()), |_| FaultPlan::default());
    let (text, cached) = greedy_completion(&first.base, &prompt(1), 8).await;
    assert_eq!(cached, 0);
    // A shutdown writes what waits before the server stops.
    first.shutdown.shutdown();
    tokio::task::spawn_blocking(move || first.stopped.recv().unwrap())
        .await
        .unwrap();

    let second = start_tiny(on_disk(dir.path()));
    let m = get_text(&second, "/metrics").await;
    assert!(metric(&m, "kiln_kv_disk_blocks_resident") >= 9.0, "{m}");
    assert_eq!(metric(&m, "kiln_kv_disk_blocks_written_total"), 0.0);
    let (again, cached) = greedy_completion(&second, &prompt(1), 8).await;
    assert_eq!(again, text, "blocks read from disk give the same reply");
    assert_eq!(cached, 144, "the 9 full blocks came from disk");
    let m = get_text(&second, "/metrics").await;
    assert_eq!(metric(&m, "kiln_kv_disk_blocks_restored_total"), 9.0, "{m}");
    assert_eq!(metric(&m, "kiln_cpu_blocks_restored_total"), 9.0, "{m}");
    // Another prompt finds nothing there and is computed.
    let (_, cached) = greedy_completion(&second, &prompt(2), 8).await;
    assert_eq!(cached, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_outlive_a_lost_device() {
    let dir = tempfile::tempdir().unwrap();
    let lose = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = lose.clone();
    let srv = start_tiny_faulty(on_disk(dir.path()), move |build| FaultPlan {
        lose_device_now: (build == 0).then(|| flag.clone()),
        ..FaultPlan::default()
    });
    let base = &srv.base;
    let (text, _) = greedy_completion(base, &prompt(3), 8).await;
    wait_metric(base, "kiln_kv_disk_blocks_written_total", 9.0).await;
    wait_metric(base, "kiln_kv_disk_blocks_pending", 0.0).await;
    lose.store(true, std::sync::atomic::Ordering::SeqCst);
    let body = json!({"prompt": prompt(4), "max_tokens": 2});
    let (s, b) = post(base, "/v1/completions", &body).await;
    assert_eq!(
        s, 500,
        "the request in flight when the device is lost fails: {b}"
    );
    wait_metric(base, "kiln_engine_restarts_total", 1.0).await;
    wait_metric(base, "kiln_up", 1.0).await;
    let (again, cached) = greedy_completion(base, &prompt(3), 8).await;
    assert_eq!((again, cached), (text, 144));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_sharing_a_folder_share_their_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        start_tiny(on_disk(dir.path())),
        start_tiny(on_disk(dir.path())),
    );
    let (text, _) = greedy_completion(&a, &prompt(5), 8).await;
    wait_metric(&a, "kiln_kv_disk_blocks_written_total", 9.0).await;
    // `b` listed the folder before `a` wrote: it finds the files by their names.
    let (again, cached) = greedy_completion(&b, &prompt(5), 8).await;
    assert_eq!((again, cached), (text, 144));
    let m = get_text(&b, "/metrics").await;
    assert_eq!(metric(&m, "kiln_kv_disk_blocks_written_total"), 0.0, "{m}");
}

/// `POST /reset_prefix_cache` lets go of every cached block, the disk tier's files too: the
/// same prompt is then computed again, with the same reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_empties_the_cache_and_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let base = start_tiny(on_disk(dir.path()));
    let (text, _) = greedy_completion(&base, &prompt(6), 8).await;
    wait_metric(&base, "kiln_kv_disk_blocks_written_total", 9.0).await;
    let (s, r) = post(&base, "/reset_prefix_cache", &json!({})).await;
    assert_eq!(s, 200, "{r}");
    let count = |k: &str| r[k].as_u64().unwrap();
    assert_eq!(count("disk_blocks"), 9, "{r}");
    assert_eq!(count("gpu_blocks") + count("cpu_blocks"), 9, "{r}");
    let m = get_text(&base, "/metrics").await;
    assert_eq!(metric(&m, "kiln_kv_disk_blocks_resident"), 0.0, "{m}");
    let (again, cached) = greedy_completion(&base, &prompt(6), 8).await;
    assert_eq!((again, cached), (text, 0));
}

/// While another request decodes, a prompt's files are read on the reader thread, the request
/// held until its blocks are in: the same reply and cached tokens as on an idle server, and
/// the decoding request goes on to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_come_back_while_another_request_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let first = start_tiny_faulty(on_disk(dir.path()), |_| FaultPlan::default());
    let (text, _) = greedy_completion(&first.base, &prompt(7), 8).await;
    first.shutdown.shutdown();
    tokio::task::spawn_blocking(move || first.stopped.recv().unwrap())
        .await
        .unwrap();

    let base = start_tiny(on_disk(dir.path()));
    let long = json!({"prompt": &prompt(8)[..20], "max_tokens": 480, "ignore_eos": true});
    let decoding = {
        let base = base.clone();
        tokio::spawn(async move { post(&base, "/v1/completions", &long).await })
    };
    wait_metric(&base, "kiln_num_requests_running", 1.0).await;
    let again = prompt(7);
    let restored =
        tokio::time::timeout(Duration::from_secs(60), greedy_completion(&base, &again, 8));
    let (again, cached) = restored.await.expect("the held request was let go");
    assert_eq!((again, cached), (text, 144));
    let m = get_text(&base, "/metrics").await;
    assert_eq!(
        metric(&m, "kiln_num_requests_running"),
        1.0,
        "still decoding: {m}"
    );
    let (s, b) = decoding.await.unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["usage"]["completion_tokens"], 480);
}
