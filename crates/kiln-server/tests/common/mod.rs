#![allow(dead_code)]

use kiln_engine::{EngineConfig, KvSize, Overlap};
use kiln_model::Model;
use kiln_model::testing::{TinyConfig, write_tiny_llama};
use kiln_server::{Frontend, ServerConfig, gpu_engine_factory, start};
use serde_json::Value;

pub const API_KEY: &str = "test-key";

/// Starts a server for the tiny random model on 127.0.0.1:0 on a thread of its own (with its
/// own runtime, so it outlives any one test's runtime). Returns its base URL.
pub fn start_tiny(tweak: impl FnOnce(&mut ServerConfig, &mut EngineConfig)) -> String {
    start_tiny_faulty(tweak, |_| kiln_engine::FaultPlan::default()).base
}

pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// `POST path` with the API key and a JSON body; the response as it comes.
pub async fn send(base: &str, path: &str, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// One SSE event of a typed stream (`event: NAME\ndata: JSON`), checked to be named by its
/// `type`.
pub fn typed_event(ev: &str) -> Value {
    let (name, data) = ev
        .strip_prefix("event: ")
        .and_then(|e| e.split_once("\ndata: "))
        .unwrap_or_else(|| panic!("bad SSE event {ev:?}"));
    let v: Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["type"], name, "{ev}");
    v
}

/// A greedy completion of `prompt` (`n` tokens): its text and the prompt tokens served from
/// the cache.
pub async fn greedy_completion(base: &str, prompt: &[u32], n: usize) -> (String, u64) {
    let body = serde_json::json!({"prompt": prompt, "max_tokens": n, "temperature": 0,
        "ignore_eos": true});
    let (s, b) = post(base, "/v1/completions", &body).await;
    assert_eq!(s, 200, "{b}");
    let cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    (
        b["choices"][0]["text"].as_str().unwrap().to_string(),
        cached,
    )
}

pub async fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = send(base, path, body).await;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}")),
    )
}

/// Posts `body` and asserts a 400 naming request field `param`; returns the error body.
pub async fn refused(base: &str, path: &str, body: &Value, param: &str) -> Value {
    let (s, r) = post(base, path, body).await;
    assert_eq!(
        (s, r["error"]["param"].as_str()),
        (400, Some(param)),
        "{body}: {r}"
    );
    r
}

pub async fn get_text(base: &str, path: &str) -> String {
    let r = client()
        .get(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.text().await.unwrap()
}

/// Sends a streaming request and returns its `data:` chunks (without `[DONE]`, which must end it).
pub async fn stream(base: &str, path: &str, body: &Value) -> Vec<Value> {
    let r = client()
        .post(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = r.text().await.unwrap();
    let mut out = Vec::new();
    let mut done = false;
    for ev in text.split("\n\n").filter(|e| !e.trim().is_empty()) {
        let data = ev
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("bad SSE event {ev:?}"));
        assert!(!done, "data after [DONE]");
        if data == "[DONE]" {
            done = true;
        } else {
            out.push(serde_json::from_str(data).unwrap());
        }
    }
    assert!(done, "stream did not end with [DONE]");
    out
}

/// The concatenated chat text of choice 0 in streamed chunks.
pub fn chat_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| {
            c["choices"].get(0)?["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Reads one metric's value from Prometheus text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("metric {name} missing"))
}

/// A tiny-model server whose engine factory is wrapped by the test (fault injection), with its
/// shutdown handle and the result of `Server::wait` once it stops.
pub struct TinyServer {
    pub base: String,
    pub shutdown: kiln_server::ShutdownHandle,
    pub stopped: std::sync::mpsc::Receiver<String>,
}

/// Like [`start_tiny`], but `plan(build)` gives the fault plan of the engine's `build`-th
/// construction (0 at start, 1 after the first rebuild, ...).
pub fn start_tiny_faulty(
    tweak: impl FnOnce(&mut ServerConfig, &mut EngineConfig),
    plan: impl Fn(usize) -> kiln_engine::FaultPlan + Send + 'static,
) -> TinyServer {
    start_model(tiny_model(&TinyConfig::default()), tweak, plan)
}

/// Like [`start_tiny_faulty`], for the model file at `path` (still served as "tiny").
pub fn start_file_faulty(
    path: &std::path::Path,
    tweak: impl FnOnce(&mut ServerConfig, &mut EngineConfig),
    plan: impl Fn(usize) -> kiln_engine::FaultPlan + Send + 'static,
) -> TinyServer {
    let model = Model::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    start_model(model, tweak, plan)
}

fn tiny_model(tc: &TinyConfig) -> Model {
    let dir = tempfile::tempdir().unwrap().keep();
    write_tiny_llama(&dir, tc, 7).unwrap();
    Model::load(&dir).unwrap()
}

/// Like [`start_tiny`], for a tiny model of another shape or other generation settings.
pub fn start_tiny_model(tc: &TinyConfig) -> String {
    start_tiny_model_with(tc, |_, _| {})
}

/// Like [`start_tiny_model`], with the server's and engine's configuration tweaked.
pub fn start_tiny_model_with(
    tc: &TinyConfig,
    tweak: impl FnOnce(&mut ServerConfig, &mut EngineConfig),
) -> String {
    start_model(tiny_model(tc), tweak, |_| kiln_engine::FaultPlan::default()).base
}

fn start_model(
    model: Model,
    tweak: impl FnOnce(&mut ServerConfig, &mut EngineConfig),
    plan: impl Fn(usize) -> kiln_engine::FaultPlan + Send + 'static,
) -> TinyServer {
    let (info, config, weights) = Frontend::split(model);
    let mut sc = ServerConfig {
        port: 0,
        served_model_name: "tiny".into(),
        ..ServerConfig::default()
    };
    let mut ec = EngineConfig {
        max_num_batched_tokens: 512,
        max_num_seqs: 64,
        kv: KvSize::Blocks(512),
        // Overlapped steps, as on a GPU (`auto` turns them off on lavapipe).
        overlap: Overlap::On,
        ..EngineConfig::default()
    };
    tweak(&mut sc, &mut ec);
    let inner = gpu_engine_factory(config, weights, ec);
    let builds = std::sync::atomic::AtomicUsize::new(0);
    let factory: kiln_server::EngineFactory = Box::new(move || {
        let n = builds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut engine = inner()?;
        engine.set_fault_plan(plan(n));
        Ok(engine)
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let (stopped_tx, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let server = start(sc, info, factory).await.expect("server start");
            tx.send((server.addr, server.shutdown_handle())).unwrap();
            let r = server.wait().await;
            let _ = stopped_tx.send(format!("{r:?}"));
        });
    });
    let (addr, shutdown) = rx.recv().expect("server thread died");
    TinyServer {
        base: format!("http://{addr}"),
        shutdown,
        stopped,
    }
}

/// `GET path`: status and body text.
pub async fn get(base: &str, path: &str) -> (u16, String) {
    let r = client()
        .get(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// `DELETE path`: status and body text.
pub async fn delete(base: &str, path: &str) -> (u16, String) {
    let r = client()
        .delete(format!("{base}{path}"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Sends a streaming request; returns the status and the `data:` payloads (`[DONE]` included).
pub async fn stream_raw(base: &str, path: &str, body: &Value) -> (u16, Vec<String>) {
    let r = send(base, path, body).await;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let events = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap_or(e).to_string())
        .collect();
    (status, events)
}

/// The tiny model given `TOOLS_THINK_TEMPLATE` (tools in Hermes blocks, `<think>` blocks),
/// one server per test binary for each `split`: replies' reasoning set apart, or left as
/// written (`--reasoning-parser none`: a grammar then holds from the first token, where the
/// random model would otherwise open a block and stay in it).
pub fn tools_think_server(split: bool) -> &'static str {
    static SERVERS: [std::sync::OnceLock<String>; 2] = [const { std::sync::OnceLock::new() }; 2];
    SERVERS[usize::from(split)].get_or_init(|| {
        let tc = TinyConfig {
            chat_template: Some(kiln_model::testing::tiny_tokenizer::TOOLS_THINK_TEMPLATE.into()),
            ..Default::default()
        };
        start_tiny_model_with(&tc, |sc, _| {
            if !split {
                sc.reasoning = Some(kiln_frontend::ReasoningFormat::None);
            }
        })
    })
}
