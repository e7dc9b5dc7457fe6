//! Prefill on one server, decode on another, on loopback with the tiny random model: the pair
//! (through `pd-proxy`) answers what one server answers, the decode server prefills only the
//! tail, pinned blocks are freed after the transfer, at their TTL and when the decode side
//! gives up, and a damaged or mismatched transfer is refused and recomputed.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use common::*;
use kiln_server::kv_transfer::{KvRole, KvTransferConfig, wire};
use kiln_server::pd_proxy::{PdProxyConfig, start as start_proxy};
use serde_json::{Value, json};

/// 150 prompt tokens: 9 full blocks (144 tokens) move, 6 are prefilled on the decode server.
fn prompt(tag: u32) -> Vec<u32> {
    (0..150).map(|i| 3 + (i * 7 + tag * 13) % 290).collect()
}

fn role(
    role: KvRole,
    ttl: u64,
) -> impl FnOnce(&mut kiln_server::ServerConfig, &mut kiln_engine::EngineConfig) {
    move |sc, ec| {
        sc.api_key = Some(API_KEY.into());
        sc.kv_transfer = Some(KvTransferConfig {
            role,
            host: "127.0.0.1".into(),
            ttl: Duration::from_secs(ttl),
        });
        ec.cpu_kv_bytes = 64 << 20;
    }
}

struct Pair {
    prefill: String,
    decode: String,
    proxy: String,
    single: String,
}

fn pair() -> &'static Pair {
    static PAIR: OnceLock<Pair> = OnceLock::new();
    PAIR.get_or_init(|| {
        let prefill = start_tiny(role(KvRole::Producer, 60));
        let decode = start_tiny(role(KvRole::Consumer, 60));
        let single = start_tiny(|sc, _| sc.api_key = Some(API_KEY.into()));
        let proxy = serve_on_own_runtime(PdProxyConfig {
            prefill: prefill.clone(),
            decode: decode.clone(),
            host: "127.0.0.1".into(),
            port: 0,
        });
        Pair {
            prefill,
            decode,
            proxy,
            single,
        }
    })
}

fn serve_on_own_runtime(cfg: PdProxyConfig) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let (addr, task) = start_proxy(cfg).await.unwrap();
            tx.send(addr).unwrap();
            let _ = task.await;
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

fn greedy(prompt: &[u32], max_tokens: usize) -> Value {
    json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": true})
}

async fn metrics(base: &str) -> String {
    get_text(base, "/metrics").await
}

/// Prefills `prompt` on the producer directly; returns its `kv_transfer_params`.
async fn prefill(base: &str, prompt: &[u32]) -> Value {
    let mut body = greedy(prompt, 1);
    body["kv_transfer_params"] = json!({"do_remote_decode": true});
    let (status, r) = post(base, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{r}");
    r["kv_transfer_params"].clone()
}

/// Decodes `prompt` on the consumer with `params`; returns (text, cached prompt tokens).
async fn decode(base: &str, prompt: &[u32], params: &Value) -> (String, u64) {
    let mut body = greedy(prompt, 10);
    body["kv_transfer_params"] = params.clone();
    let (status, r) = post(base, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{r}");
    (
        r["choices"][0]["text"].as_str().unwrap().to_string(),
        r["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
    )
}

async fn single_text(prompt: &[u32]) -> String {
    let (_, r) = post(&pair().single, "/v1/completions", &greedy(prompt, 10)).await;
    r["choices"][0]["text"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_pair_answers_as_one_server_and_decode_prefills_only_the_tail() {
    let p = pair();
    let imported_before = metric(
        &metrics(&p.decode).await,
        "kiln_kv_transfer_imported_blocks_total",
    );
    let prefill_before = metric(&metrics(&p.decode).await, "kiln_prefill_tokens_total");
    let ids = prompt(1);
    let (status, r) = post(&p.proxy, "/v1/completions", &greedy(&ids, 10)).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["choices"][0]["text"], single_text(&ids).await.as_str());
    assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], 144);
    let m = metrics(&p.decode).await;
    assert_eq!(
        metric(&m, "kiln_kv_transfer_imported_blocks_total") - imported_before,
        9.0
    );
    assert_eq!(
        metric(&m, "kiln_prefill_tokens_total") - prefill_before,
        6.0
    );
    // The producer freed its pin once the blocks were fetched.
    assert_eq!(
        metric(&metrics(&p.prefill).await, "kiln_kv_blocks_pinned"),
        0.0
    );

    // Chat, streamed through the proxy, equals the single server's stream.
    let body = json!({"messages": [{"role": "user", "content": "a b c d e f g h i j k l m n o p q r s t u v w x y z ".repeat(3)}],
        "max_tokens": 8, "temperature": 0, "stream": true});
    let through = chat_text(&stream(&p.proxy, "/v1/chat/completions", &body).await);
    let alone = chat_text(&stream(&p.single, "/v1/chat/completions", &body).await);
    assert_eq!(through, alone);
    // Other routes are the decode server's.
    let (status, _) = get(&p.proxy, "/v1/models").await;
    assert_eq!(status, 200);
    assert_eq!(get(&p.proxy, "/health").await.0, 200);
}

#[tokio::test]
async fn salted_requests_move_under_their_salt() {
    let p = pair();
    let ids = prompt(6);
    let mut body = greedy(&ids, 10);
    body["cache_salt"] = json!("tenant");
    let (status, r) = post(&p.proxy, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], 144);
    assert_eq!(r["choices"][0]["text"], single_text(&ids).await.as_str());
    // Blocks prefilled under one salt are refused for a request under another.
    let mut pre = greedy(&ids, 1);
    pre["cache_salt"] = json!("tenant");
    pre["kv_transfer_params"] = json!({"do_remote_decode": true});
    let (_, r) = post(&p.prefill, "/v1/completions", &pre).await;
    body["cache_salt"] = json!("other");
    body["kv_transfer_params"] = r["kv_transfer_params"].clone();
    let (status, r) = post(&p.decode, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

#[tokio::test]
async fn pinned_blocks_are_freed_at_their_ttl_and_after_an_aborted_decode() {
    let p = pair();
    let producer = start_tiny(role(KvRole::Producer, 1));
    let params = prefill(&producer, &prompt(2)).await;
    assert_eq!(params["remote_block_ids"].as_array().unwrap().len(), 9);
    assert_eq!(
        metric(&metrics(&producer).await, "kiln_kv_blocks_pinned"),
        9.0
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        metric(&metrics(&producer).await, "kiln_kv_blocks_pinned"),
        0.0
    );
    let id = params["remote_request_id"].as_str().unwrap();
    assert_eq!(
        get(&producer, &format!("/v1/kv_transfer/{id}")).await.0,
        404
    );
    // Expired: the decode server prefills the whole prompt, and answers the same.
    let failures = metric(&metrics(&p.decode).await, "kiln_kv_transfer_failures_total");
    let (text, cached) = decode(&p.decode, &prompt(2), &params).await;
    assert_eq!((text, cached), (single_text(&prompt(2)).await, 0));
    assert_eq!(
        metric(&metrics(&p.decode).await, "kiln_kv_transfer_failures_total") - failures,
        1.0
    );

    // A decode whose client goes away frees its blocks on the decode server.
    let params = prefill(&p.prefill, &prompt(3)).await;
    let mut body = greedy(&prompt(3), 200);
    body["kv_transfer_params"] = params;
    body["stream"] = json!(true);
    let r = client()
        .post(format!("{}/v1/completions", p.decode))
        .bearer_auth(API_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(r);
    let mut used = f64::NAN;
    for _ in 0..100 {
        used = metric(&metrics(&p.decode).await, "kiln_kv_blocks_used");
        if used == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(used, 0.0);
    assert_eq!(
        metric(&metrics(&p.prefill).await, "kiln_kv_blocks_pinned"),
        0.0
    );
}

/// Serves `body` as a producer's export of any request.
fn fake_producer(body: Vec<u8>) -> (String, u16) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let app = axum::Router::new()
                .route(
                    "/v1/kv_transfer/{id}",
                    axum::routing::get(|State(b): State<Vec<u8>>| async move { b }),
                )
                .with_state(body);
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap().port()).unwrap();
            axum::serve(l, app).await.unwrap();
        });
    });
    ("127.0.0.1".into(), rx.recv().unwrap())
}

#[tokio::test]
async fn damaged_or_mismatched_blocks_are_refused_and_recomputed() {
    let p = pair();
    let ids = prompt(4);
    let params = prefill(&p.prefill, &ids).await;
    let id = params["remote_request_id"].as_str().unwrap();
    let r = client()
        .get(format!("{}/v1/kv_transfer/{id}", p.prefill))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.bytes().await.unwrap().to_vec();
    let (header, data) = wire::decode(&body).unwrap();
    assert_eq!(header.blocks.len(), 9);
    let expected = single_text(&ids).await;
    // Each case: (what is altered, cached tokens on the decode server).
    let per = header.bytes_per_block;
    let cases: Vec<(&str, wire::Header, Vec<u8>, u64)> = vec![
        ("nothing", header.clone(), data.to_vec(), 144),
        (
            "a byte of block 3",
            header.clone(),
            {
                let mut d = data.to_vec();
                d[3 * per + 5] ^= 0x40;
                d
            },
            48,
        ),
        (
            "block 2's hash",
            {
                let mut h = header.clone();
                h.blocks[2].hash ^= 1;
                h.blocks[3].parent = Some(h.blocks[2].hash);
                h
            },
            data.to_vec(),
            32,
        ),
        (
            "block 5's tokens",
            {
                let mut h = header.clone();
                h.blocks[5].tokens[0] += 1;
                h
            },
            data.to_vec(),
            80,
        ),
        (
            "the layer count",
            {
                let mut h = header.clone();
                h.layers += 1;
                h
            },
            data.to_vec(),
            0,
        ),
    ];
    for (what, h, d, cached) in cases {
        // A fresh consumer each time: blocks stored by an earlier case would be found again.
        let consumer = start_tiny(role(KvRole::Consumer, 60));
        let (host, port) = fake_producer(wire::encode(&h, &d));
        let mut params = params.clone();
        params["remote_host"] = json!(host);
        params["remote_port"] = json!(port);
        let (text, got) = decode(&consumer, &ids, &params).await;
        assert_eq!(got, cached, "{what}: cached tokens");
        assert_eq!(text, expected, "{what}: output");
    }
}

#[tokio::test]
async fn transfer_params_are_checked_against_the_role() {
    let p = pair();
    let mut body = greedy(&prompt(5), 4);
    body["kv_transfer_params"] = json!({"do_remote_decode": true});
    refused(&p.single, "/v1/completions", &body, "kv_transfer_params").await;
    let (status, _) = post(&p.decode, "/v1/completions", &body).await;
    assert_eq!(status, 400);
    body["stream"] = json!(true);
    let (status, _) = post(&p.prefill, "/v1/completions", &body).await;
    assert_eq!(status, 400, "a streamed prefill leg");
    body["stream"] = json!(false);
    body["kv_transfer_params"] = json!({"do_remote_prefill": true});
    let (status, r) = post(&p.decode, "/v1/completions", &body).await;
    assert_eq!(status, 400, "no remote host: {r}");
    body["kv_transfer_params"] = json!({"do_remote_decode": true, "tp_size": 1});
    let (status, r) = post(&p.prefill, "/v1/completions", &body).await;
    assert_eq!(status, 400);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("tp_size"),
        "{r}"
    );
    // Without kv_transfer_params a producer serves as any server.
    let (status, r) = post(&p.prefill, "/v1/completions", &greedy(&prompt(5), 4)).await;
    assert_eq!(status, 200);
    assert!(r.get("kv_transfer_params").is_none());
}
