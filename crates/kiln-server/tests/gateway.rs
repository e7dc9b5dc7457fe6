//! The model-server protocol of the Kubernetes inference gateway, against the tiny random
//! model: the metrics its endpoint picker scrapes (names, types, labels, value ranges, read
//! with a Prometheus text parser, and the names the deploy/ EPP config maps), and the render
//! endpoints its precise prefix routing calls (the ids equal what the server prefills).

mod common;

use std::collections::HashMap;
use std::sync::OnceLock;

use common::*;
use futures_util::StreamExt;
use prometheus_parse::{Sample, Scrape, Value as PValue};
use serde_json::{Value, json};

const BLOCKS: usize = 96;

fn new_server() -> String {
    start_tiny(|sc, ec| {
        sc.api_key = Some(API_KEY.into());
        ec.kv = kiln_engine::KvSize::Blocks(BLOCKS);
    })
}

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(new_server)
}

async fn scrape(base: &str) -> Scrape {
    let text = get_text(base, "/metrics").await;
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("valid Prometheus text")
}

fn gauge<'a>(s: &'a Scrape, name: &str) -> &'a Sample {
    let found: Vec<&Sample> = s.samples.iter().filter(|x| x.metric == name).collect();
    assert_eq!(found.len(), 1, "{name}: exactly one series");
    assert!(
        matches!(found[0].value, PValue::Gauge(_)),
        "{name} must be a gauge: {:?}",
        found[0].value
    );
    found[0]
}

fn value(s: &Sample) -> f64 {
    match s.value {
        PValue::Gauge(v) | PValue::Counter(v) | PValue::Untyped(v) => v,
        _ => panic!("{} is not a scalar", s.metric),
    }
}

/// The metric names that deploy/'s EPP config maps for the `kiln` engine.
fn epp_engine_specs() -> HashMap<String, String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/base/epp-config.yaml"
    );
    let text = std::fs::read_to_string(path).expect("deploy/base/epp-config.yaml");
    let mut specs = HashMap::new();
    let mut in_kiln = false;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- name:") {
            in_kiln = name.trim().trim_matches('"') == "kiln";
        } else if in_kiln
            && let Some((k, v)) = line.split_once(':')
            && k.ends_with("Spec")
        {
            specs.insert(k.to_string(), v.trim().trim_matches('"').to_string());
        }
    }
    specs
}

fn check_contract(s: &Scrape) -> (f64, f64, f64) {
    let waiting = value(gauge(s, "kiln_num_requests_waiting"));
    let running = value(gauge(s, "kiln_num_requests_running"));
    let usage = value(gauge(s, "kiln_kv_cache_usage_perc"));
    for (n, v) in [("waiting", waiting), ("running", running)] {
        assert!(v >= 0.0 && v.fract() == 0.0, "{n} = {v} is not a count");
    }
    assert!(
        (0.0..=1.0).contains(&usage),
        "KV usage {usage} outside 0..1"
    );
    let info = gauge(s, "kiln_cache_config_info");
    assert_eq!(value(info), 1.0);
    assert_eq!(
        info.labels.get("block_size"),
        Some(&*kiln_core::BLOCK_SIZE.to_string())
    );
    assert_eq!(
        info.labels.get("num_gpu_blocks"),
        Some(&*BLOCKS.to_string())
    );
    assert_eq!(info.labels.get("cache_dtype"), Some(&*"f16".to_string()));
    (waiting, running, usage)
}

#[tokio::test]
async fn metrics_follow_the_model_server_protocol() {
    // A server of its own: the request counts must not see the other test's requests.
    let owned = new_server();
    let base = owned.as_str();
    let (waiting, running, usage) = check_contract(&scrape(base).await);
    assert_eq!((waiting, running, usage), (0.0, 0.0, 0.0), "idle server");

    // While a long generation runs: one running request holding KV blocks.
    let body = json!({"model": "tiny", "prompt": "a b c d e f g h i j k l m n o p q r s t u v w x y z", "max_tokens": 400,
                      "ignore_eos": true, "temperature": 0, "stream": true});
    let resp = client()
        .post(format!("{base}/v1/completions"))
        .bearer_auth(API_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut chunks = resp.bytes_stream();
    chunks.next().await.expect("a first chunk").unwrap();
    let (_, running, usage) = check_contract(&scrape(base).await);
    assert_eq!(running, 1.0, "one request is generating");
    assert!(usage > 0.0 && usage < 1.0, "its blocks are in use: {usage}");
    drop(chunks);

    // Every spec of the deploy/ EPP config names a gauge kiln exposes (an empty spec is off).
    let specs = epp_engine_specs();
    for k in [
        "queuedRequestsSpec",
        "runningRequestsSpec",
        "kvUsageSpec",
        "cacheInfoSpec",
    ] {
        let name = specs
            .get(k)
            .unwrap_or_else(|| panic!("the kiln engine entry lacks {k}"));
        gauge(&scrape(base).await, name);
    }
    assert_eq!(specs["queuedRequestsSpec"], "kiln_num_requests_waiting");
    assert_eq!(specs["runningRequestsSpec"], "kiln_num_requests_running");
    assert_eq!(specs["kvUsageSpec"], "kiln_kv_cache_usage_perc");
    assert_eq!(specs["cacheInfoSpec"], "kiln_cache_config_info");
}

#[tokio::test]
async fn render_gives_the_ids_the_server_prefills() {
    let base = server();
    let messages = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name three colours."}]);
    let (s, r) = post(
        base,
        "/v1/chat/completions/render",
        &json!({"model": "tiny", "messages": messages, "max_tokens": 8}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    let ids: Vec<u64> = r["token_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(ids.len() > 8, "{r}");

    // The chat request prefills that many tokens, and greedy output from those ids as a
    // token-id completion is the chat's output: the same prompt reached the engine.
    let (s, chat) = post(base, "/v1/chat/completions", &json!({"model": "tiny", "messages": messages, "max_tokens": 8, "temperature": 0, "ignore_eos": true})).await;
    assert_eq!(s, 200, "{chat}");
    assert_eq!(
        chat["usage"]["prompt_tokens"].as_u64().unwrap() as usize,
        ids.len()
    );
    let (s, comp) = post(base, "/v1/completions", &json!({"model": "tiny", "prompt": ids, "max_tokens": 8, "temperature": 0, "ignore_eos": true})).await;
    assert_eq!(s, 200, "{comp}");
    assert_eq!(
        comp["choices"][0]["text"],
        chat["choices"][0]["message"]["content"]
    );

    // Completions: one entry per prompt, text prompts tokenized as generation does.
    let (s, r) = post(
        base,
        "/v1/completions/render",
        &json!({"model": "tiny", "prompt": ["hello world", "a b c"]}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    let lists = r.as_array().unwrap();
    assert_eq!(lists.len(), 2);
    let (_, tok) = post(
        base,
        "/tokenize",
        &json!({"model": "tiny", "prompt": "hello world"}),
    )
    .await;
    assert_eq!(lists[0]["token_ids"], tok["tokens"]);
    let (_, out) = post(
        base,
        "/v1/completions",
        &json!({"model": "tiny", "prompt": "a b c", "max_tokens": 1}),
    )
    .await;
    assert_eq!(
        out["usage"]["prompt_tokens"].as_u64().unwrap() as usize,
        lists[1]["token_ids"].as_array().unwrap().len()
    );
    let (s, r) = post(
        base,
        "/v1/completions/render",
        &json!({"model": "tiny", "prompt": [5, 6, 7]}),
    )
    .await;
    assert_eq!((s, r), (200, json!([{"token_ids": [5, 6, 7]}])));

    // Bodies the generation endpoints refuse are refused the same way.
    let bad: Vec<(&str, Value, &str)> = vec![
        (
            "/v1/completions/render",
            json!({"model": "tiny", "prompt": []}),
            "prompt",
        ),
        (
            "/v1/completions/render",
            json!({"model": "tiny", "prompt": [999999]}),
            "prompt",
        ),
        (
            "/v1/completions/render",
            json!({"model": "tiny", "prompt": "x", "prompt_logprobs": 21}),
            "prompt_logprobs",
        ),
        (
            "/v1/chat/completions/render",
            json!({"model": "tiny", "messages": []}),
            "messages",
        ),
        (
            "/v1/chat/completions/render",
            json!({"model": "tiny", "messages": messages, "max_tokens": 100000}),
            "max_tokens",
        ),
        (
            "/v1/chat/completions/render",
            json!({"model": "tiny", "messages": messages, "temperature": -1}),
            "temperature",
        ),
    ];
    for (path, body, param) in bad {
        let (s, r) = post(base, path, &body).await;
        assert_eq!(s, 400, "{path} {body}: {r}");
        assert_eq!(r["error"]["param"], param, "{path} {body}: {r}");
    }
    let (s, _) = post(
        base,
        "/v1/chat/completions/render",
        &json!({"model": "other", "messages": messages}),
    )
    .await;
    assert_eq!(s, 404);
}
