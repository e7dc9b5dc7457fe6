//! LoRA adapters through the API (`kiln serve --lora-modules NAME=PATH`): a request's
//! `model` names the adapter it runs through; its reply is that of a server for the model with
//! the adapter merged in, while requests for the served model in the same steps get the base
//! model's; `/v1/models` lists the adapters with their parent; an unknown name is a 404;
//! the same prompt through another adapter finds none of its cached blocks; more adapters
//! than slots; adapters loaded and unloaded through vLLM's runtime routes.

mod common;

use std::sync::Arc;

use common::*;
use kiln_model::testing::{TinyConfig, TinyLora};
use kiln_model::{DType, LoraAdapter};
use serde_json::{Value, json};

fn adapter(seed: u64) -> TinyLora {
    TinyLora {
        modules: ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
            .map(String::from)
            .to_vec(),
        rank: 4,
        alpha: 8.0,
        rslora: false,
        seed,
    }
}

/// A folder with adapter 31 for the tiny model (served by `start_tiny`), returned, and beside
/// it `merged`, the model with the adapter merged in. (Seed 31: its greedy reply has no near
/// tie that f16 rounding of the merged weights could break, as seed 41's has at its fourth
/// token, 0.0003 apart.)
fn adapter_and_merged() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tc = TinyConfig::default();
    let a = dir.path().join("a");
    adapter(31)
        .write(&a, &tc.model_config(), DType::F16)
        .unwrap();
    (adapter(31).write_merged(&dir.path().join("merged"), &tc, 7, DType::F16)).unwrap();
    (dir, a)
}

/// Adapter 31 (at `a`) as "sql" and adapter 32 (written beside it) as "poet".
fn sql_and_poet(dir: &std::path::Path, a: &std::path::Path) -> Vec<Arc<LoraAdapter>> {
    let mc = TinyConfig::default().model_config();
    let b = dir.join("b");
    adapter(32).write(&b, &mc, DType::F16).unwrap();
    [("sql", a), ("poet", &b)]
        .iter()
        .map(|(n, p)| Arc::new(LoraAdapter::load(n, p, &mc).unwrap()))
        .collect()
}

/// A greedy chat reply's text and `model`, and the prompt tokens it found cached.
async fn reply(base: &str, model: &str) -> (String, String, u64) {
    let body = json!({"model": model, "max_tokens": 12, "temperature": 0.0, "ignore_eos": true,
        "messages": [{"role": "user", "content": "tell me about the cat that sat on the mat and then went for a walk"}]});
    let (s, r) = post(base, "/v1/chat/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    let text = r["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    (text, r["model"].as_str().unwrap().to_string(), cached)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_runs_through_the_adapter_its_model_names() {
    let (dir, a) = adapter_and_merged();
    let mc = TinyConfig::default().model_config();
    let merged = dir.path().join("merged");
    let loaded = sql_and_poet(dir.path(), &a);
    let base = start_tiny(|_, ec| ec.lora = loaded);
    let plain = start_tiny(|_, _| {});
    let want = start_file_faulty(&merged, |_, _| {}, |_| Default::default()).base;

    let (m, _) = get(&base, "/v1/models").await;
    assert_eq!(m, 200);
    let (_, body) = get(&base, "/v1/models").await;
    let list: Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = (list["data"].as_array().unwrap().iter())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["tiny", "sql", "poet"]);
    assert_eq!(list["data"][1]["parent"], "tiny");
    assert_eq!(list["data"][1]["root"], a.display().to_string());
    let (s, card) = get(&base, "/v1/models/poet").await;
    assert_eq!(s, 200, "{card}");

    // Through the adapter and not, at once.
    let (through, plain_reply, want_reply, other) = tokio::join!(
        reply(&base, "sql"),
        reply(&base, "tiny"),
        reply(&want, "tiny"),
        reply(&base, "poet"),
    );
    assert_eq!(
        through.0, want_reply.0,
        "the adapter's reply is the merged model's"
    );
    assert_eq!(through.1, "sql", "the response names the adapter");
    assert_eq!(
        plain_reply.0,
        reply(&plain, "tiny").await.0,
        "the base model's reply"
    );
    assert_ne!(through.0, plain_reply.0, "the adapter changes the reply");
    assert_ne!(other.0, through.0, "each adapter its own");

    // Cached blocks stay with their adapter: the same prompt through the same adapter finds
    // its blocks, through the other its own, never the base model's.
    let again = reply(&base, "sql").await;
    assert_eq!(again.0, through.0);
    assert!(again.2 > 0, "cached through the same adapter: {}", again.2);
    let fresh = dir.path().join("c");
    adapter(33).write(&fresh, &mc, DType::F16).unwrap();
    let third = Arc::new(LoraAdapter::load("third", &fresh, &mc).unwrap());
    let only_base = start_tiny(|_, ec| ec.lora = vec![third]);
    let first = reply(&only_base, "tiny").await;
    assert_eq!(first.2, 0);
    assert_eq!(
        reply(&only_base, "third").await.2,
        0,
        "no block of the base model's"
    );

    // An unknown name, in each generation route.
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        ("/v1/completions", json!({"model": "nope", "prompt": "hi"})),
        ("/v1/embeddings", json!({"model": "nope", "input": "hi"})),
    ] {
        let (s, r) = post(&base, path, &body).await;
        assert_eq!(s, 404, "{path}: {r}");
        assert_eq!(r["error"]["code"], "model_not_found", "{path}: {r}");
    }
}

/// `--max-loras 1` with two `--lora-modules` adapters: requests through both and through none
/// at once all get their replies (the second adapter's wait for the slot), each what a server
/// with a slot per adapter gives, though with `--max-cpu-loras 1` the second adapter's values
/// are read again from its file; `/metrics` counts the loads into the slot and the reads and,
/// while a long request through one adapter runs, names the other as waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_adapters_than_slots_serve_every_request() {
    let (dir, a) = adapter_and_merged();
    let loaded = sql_and_poet(dir.path(), &a);
    let one_slot = start_tiny(|_, ec| {
        ec.lora = loaded.clone();
        ec.lora_capacity = Some(kiln_engine::LoraCapacity { slots: 1, rank: 4 });
        ec.max_cpu_loras = Some(1);
    });
    let each_own = start_tiny(|_, ec| ec.lora = loaded);
    let (sql, poet, plain) = tokio::join!(
        reply(&one_slot, "sql"),
        reply(&one_slot, "poet"),
        reply(&one_slot, "tiny"),
    );
    assert_eq!(sql.0, reply(&each_own, "sql").await.0);
    assert_eq!(poet.0, reply(&each_own, "poet").await.0);
    assert_eq!(plain.0, reply(&each_own, "tiny").await.0);
    assert_ne!(sql.0, poet.0);
    // sql sat in the slot from the start: poet's load, and sql's again if poet's request
    // came first.
    let text = get_text(&one_slot, "/metrics").await;
    let loads = metric(&text, "kiln_lora_loads_total");
    assert!((1.0..=2.0).contains(&loads), "{loads}");
    // poet let go of its values at start (sql, listed first, kept them).
    let reads = metric(&text, "kiln_lora_reads_total");
    assert!(reads >= 1.0, "{reads}");
    let idle = "kiln_lora_requests_info{max_lora=\"1\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1";
    assert!(text.contains(idle), "{text}");

    // A long request through one adapter holds the slot: one through the other waits, and
    // the metric says so.
    let long = json!({"model": "sql", "prompt": "a", "max_tokens": 500, "ignore_eos": true});
    let busy = tokio::spawn({
        let base = one_slot.clone();
        async move { post(&base, "/v1/completions", &long).await }
    });
    let seen = |want: &'static str| {
        let base = one_slot.clone();
        async move {
            for _ in 0..2000 {
                let text = get_text(&base, "/metrics").await;
                if text.contains(want) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            panic!("never saw {want}");
        }
    };
    seen("running_lora_adapters=\"sql\"").await;
    let waiting = tokio::spawn({
        let base = one_slot.clone();
        async move { reply(&base, "poet").await }
    });
    seen("running_lora_adapters=\"sql\",waiting_lora_adapters=\"poet\"").await;
    assert_eq!(busy.await.unwrap().0, 200);
    assert_eq!(waiting.await.unwrap().0, poet.0);
}

#[test]
fn an_adapter_of_another_model_is_refused_with_the_file_and_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let tc = TinyConfig::default();
    let wider = TinyConfig {
        intermediate_size: tc.intermediate_size + 8,
        ..tc.clone()
    };
    adapter(1)
        .write(dir.path(), &wider.model_config(), DType::F32)
        .unwrap();
    let err = LoraAdapter::load("x", dir.path(), &tc.model_config())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("adapter_model.safetensors does not fit the model")
            && err.contains("down_proj"),
        "{err}"
    );
}

/// vLLM's runtime routes, where the server has room for adapters loaded while it runs
/// (`--allow-runtime-lora-updating`): load, serve through, list, refuse a second load of the
/// name and a folder that is no adapter, unload (then a 404 for the name), load the same
/// adapter from llama.cpp's GGUF adapter file and refuse a model's GGUF file; and no such
/// routes on a server without the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_load_and_unload_through_the_api() {
    let (dir, a) = adapter_and_merged();
    let merged = dir.path().join("merged");
    let room = Some(kiln_engine::LoraCapacity { slots: 2, rank: 8 });
    let base = start_tiny(|c, ec| {
        c.runtime_lora_updating = true;
        ec.lora_capacity = room;
    });
    let want = start_file_faulty(&merged, |_, _| {}, |_| Default::default()).base;
    let text = |path: &'static str, body: Value| {
        let base = base.clone();
        async move {
            let r = send(&base, path, &body).await;
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let load = json!({"lora_name": "sql", "lora_path": a.to_str().unwrap()});
    let (s, body) = text("/v1/load_lora_adapter", load.clone()).await;
    assert_eq!(
        (s, body.as_str()),
        (200, "Success: LoRA adapter 'sql' added successfully.")
    );
    let (_, list) = get(&base, "/v1/models").await;
    assert!(list.contains("\"sql\""), "{list}");
    assert_eq!(reply(&base, "sql").await.0, reply(&want, "tiny").await.0);

    let (s, body) = text("/v1/load_lora_adapter", load).await;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("already loaded"), "{body}");
    // vLLM's load_inplace: other weights under the same name (adapter 32, "poet" on a server
    // holding both), then the first again.
    let b = dir.path().join("b");
    let with_poet = start_tiny(|_, ec| ec.lora = sql_and_poet(dir.path(), &a));
    let inplace = |p: &std::path::Path| json!({"lora_name": "sql", "lora_path": p.to_str().unwrap(), "load_inplace": true});
    let (s, body) = text("/v1/load_lora_adapter", inplace(&b)).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        reply(&base, "sql").await.0,
        reply(&with_poet, "poet").await.0
    );
    let (s, body) = text("/v1/load_lora_adapter", inplace(&a)).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(reply(&base, "sql").await.0, reply(&want, "tiny").await.0);
    let nowhere = json!({"lora_name": "x", "lora_path": dir.path().join("none").to_str().unwrap()});
    let (s, body) = text("/v1/load_lora_adapter", nowhere).await;
    assert!(
        s == 400 && body.contains("lora_path") && body.contains("adapter_config.json"),
        "{body}"
    );

    let (s, body) = text("/v1/unload_lora_adapter", json!({"lora_name": "sql"})).await;
    assert_eq!(
        (s, body.as_str()),
        (200, "Success: LoRA adapter 'sql' removed successfully.")
    );
    let (s, r) = post(
        &base,
        "/v1/completions",
        &json!({"model": "sql", "prompt": "hi"}),
    )
    .await;
    assert_eq!(s, 404, "{r}");
    let (s, _) = text("/v1/unload_lora_adapter", json!({"lora_name": "sql"})).await;
    assert_eq!(s, 404);

    let file = dir.path().join("sql.gguf");
    let mc = TinyConfig::default().model_config();
    adapter(31).write_gguf(&file, &mc, DType::F16).unwrap();
    let load = json!({"lora_name": "sql-gguf", "lora_path": file.to_str().unwrap()});
    let (s, body) = text("/v1/load_lora_adapter", load).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        reply(&base, "sql-gguf").await.0,
        reply(&want, "tiny").await.0
    );
    let model_file = dir.path().join("model.gguf");
    kiln_model::testing::write_tiny_gguf(&model_file, &TinyConfig::default(), 7, DType::F32)
        .unwrap();
    let load = json!({"lora_name": "m", "lora_path": model_file.to_str().unwrap()});
    let (s, body) = text("/v1/load_lora_adapter", load).await;
    assert!(
        s == 400 && body.contains("model.gguf") && body.contains("general.type"),
        "{body}"
    );

    // No routes without the flag, even with room for adapters (`--max-loras` alone).
    let fixed = start_tiny(|_, _| {});
    let slots_only = start_tiny(|_, ec| ec.lora_capacity = room);
    for server in [fixed, slots_only] {
        let r = send(
            &server,
            "/v1/load_lora_adapter",
            &json!({"lora_name": "x", "lora_path": "/"}),
        )
        .await;
        assert_eq!(r.status().as_u16(), 404);
    }
}
