//! `kiln bench`: a benchmark client for any OpenAI-compatible server. Synthetic prompts at a
//! fixed request rate or concurrency, or an agent loop (sessions of many turns whose prompt is
//! the whole conversation so far plus a tool result). Streams every request and reports TTFT,
//! time per output token, inter-token latency, end-to-end latency, throughput and the
//! prefix-cache hit rate, as a table and optionally as JSON.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Independent requests with synthetic prompts of --input-len words.
    Random,
    /// --sessions conversations of --turns turns each.
    Agent,
}

#[derive(clap::Args, Clone)]
pub struct Args {
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    base_url: String,
    /// Model name to send (default: the first one the server lists).
    #[arg(long)]
    model: Option<String>,
    #[arg(long)]
    api_key: Option<String>,
    #[arg(long, value_enum, default_value = "random")]
    workload: Workload,
    /// Requests of the random workload.
    #[arg(long, default_value_t = 64)]
    num_prompts: usize,
    /// Prompt length in words (about one token each).
    #[arg(long, default_value_t = 128)]
    input_len: usize,
    /// Tokens to generate per request (sent with ignore_eos).
    #[arg(long, default_value_t = 64)]
    output_len: usize,
    /// When set, each request's output length is drawn uniformly from here to --output-len
    /// (mixed lengths are where continuous batching pulls ahead of static batching).
    #[arg(long)]
    output_len_min: Option<usize>,
    /// Requests per second (Poisson arrivals); default: all at once, limited by --concurrency.
    #[arg(long)]
    request_rate: Option<f64>,
    /// Most requests (random) or sessions (agent) in flight.
    #[arg(long)]
    concurrency: Option<usize>,
    /// Static batching baseline (random workload): send --concurrency requests, wait until all
    /// of them are done, then send the next batch, as an engine without continuous batching would.
    #[arg(long)]
    static_batch: bool,
    #[arg(long, default_value_t = 8)]
    sessions: usize,
    #[arg(long, default_value_t = 6)]
    turns: usize,
    /// Words of each turn's tool result.
    #[arg(long, default_value_t = 48)]
    tool_result_len: usize,
    /// Pause between turns of a session, in milliseconds.
    #[arg(long, default_value_t = 200)]
    think_ms: u64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One request's measurements.
#[derive(Clone, Debug, Default)]
struct Record {
    ok: bool,
    error: Option<String>,
    ttft: f64,
    itl: Vec<f64>,
    e2e: f64,
    prompt_tokens: usize,
    completion_tokens: usize,
    cached_tokens: usize,
    text: String,
}

const WORDS: &[&str] = &[
    "the", "kiln", "fires", "clay", "at", "high", "heat", "and", "glaze", "turns", "to", "glass",
    "while", "potter", "waits", "for", "cool", "air", "a", "slow", "ramp", "keeps", "pots", "from",
    "cracking", "in", "wood", "smoke",
];

fn words(rng: &mut StdRng, n: usize) -> String {
    (0..n)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(a))
}

async fn run_async(mut a: Args) -> anyhow::Result<()> {
    a.base_url = a.base_url.trim_end_matches('/').to_string();
    let client = reqwest::Client::builder().build()?;
    if a.model.is_none() {
        let mut r = client.get(format!("{}/v1/models", a.base_url));
        if let Some(k) = &a.api_key {
            r = r.bearer_auth(k);
        }
        let models: Value = r
            .send()
            .await
            .context("GET /v1/models")?
            .error_for_status()?
            .json()
            .await?;
        a.model = Some(
            models["data"][0]["id"]
                .as_str()
                .context("the server lists no models")?
                .to_string(),
        );
    }
    let total = match a.workload {
        Workload::Random => a.num_prompts,
        Workload::Agent => a.sessions * a.turns,
    };
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} requests {elapsed} ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let a = Arc::new(a);
    let start = Instant::now();
    let records = match a.workload {
        Workload::Random => random_workload(&client, &a, &bar).await?,
        Workload::Agent => agent_workload(&client, &a, &bar).await?,
    };
    let duration = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let report = summarize(&a, &records, duration);
    print_table(&report);
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
        eprintln!("wrote {}", p.display());
    }
    if records.iter().all(|r| !r.ok) {
        bail!(
            "every request failed; first error: {}",
            records
                .first()
                .and_then(|r| r.error.clone())
                .unwrap_or_default()
        );
    }
    Ok(())
}

async fn random_workload(
    client: &reqwest::Client,
    a: &Arc<Args>,
    bar: &ProgressBar,
) -> anyhow::Result<Vec<Record>> {
    let mut rng = StdRng::seed_from_u64(a.seed);
    let permits = Arc::new(Semaphore::new(a.concurrency.unwrap_or(usize::MAX >> 4)));
    let mut tasks = Vec::new();
    let mut out = Vec::new();
    for _ in 0..a.num_prompts {
        if let Some(rate) = a.request_rate {
            let gap = -(1.0 - rng.random::<f64>()).ln() / rate;
            tokio::time::sleep(Duration::from_secs_f64(gap)).await;
        }
        let max_tokens = match a.output_len_min {
            Some(lo) => rng.random_range(lo.min(a.output_len)..=a.output_len),
            None => a.output_len,
        };
        let body = json!({
            "model": a.model, "prompt": words(&mut rng, a.input_len), "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
        });
        let permit = permits.clone().acquire_owned().await?;
        let (client, args, bar) = (client.clone(), a.clone(), bar.clone());
        tasks.push(tokio::spawn(async move {
            let r = send(&client, &args, "/v1/completions", &body).await;
            drop(permit);
            bar.inc(1);
            r
        }));
        if a.static_batch && tasks.len() >= a.concurrency.unwrap_or(1).max(1) {
            // The whole batch finishes before the next one starts.
            for t in tasks.drain(..) {
                out.push(t.await?);
            }
        }
    }
    for t in tasks {
        out.push(t.await?);
    }
    Ok(out)
}

async fn agent_workload(
    client: &reqwest::Client,
    a: &Arc<Args>,
    bar: &ProgressBar,
) -> anyhow::Result<Vec<Record>> {
    let permits = Arc::new(Semaphore::new(a.concurrency.unwrap_or(a.sessions).max(1)));
    let mut tasks = Vec::new();
    for s in 0..a.sessions {
        let (client, a, bar, permits) = (client.clone(), a.clone(), bar.clone(), permits.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await;
            let mut rng = StdRng::seed_from_u64(a.seed ^ ((s as u64 + 1) * 0x9E37_79B9));
            let mut messages = vec![
                json!({"role": "system", "content": "You are an agent. Call tools, read their results, and continue."}),
                json!({"role": "user", "content": format!("Task {s}: {}", words(&mut rng, a.input_len))}),
            ];
            let mut records = Vec::new();
            for turn in 0..a.turns {
                let body = json!({
                    "model": a.model, "messages": messages, "max_tokens": a.output_len, "temperature": 0,
                    "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
                });
                let r = send(&client, &a, "/v1/chat/completions", &body).await;
                bar.inc(1);
                messages.push(json!({"role": "assistant", "content": r.text}));
                messages.push(json!({"role": "user", "content": format!("Tool result {turn}: {}", words(&mut rng, a.tool_result_len))}));
                records.push(r);
                tokio::time::sleep(Duration::from_millis(a.think_ms)).await;
            }
            records
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.extend(t.await?);
    }
    Ok(out)
}

/// Sends one streaming request and times its chunks.
async fn send(client: &reqwest::Client, a: &Args, path: &str, body: &Value) -> Record {
    let start = Instant::now();
    let mut rec = Record::default();
    let mut req = client.post(format!("{}{path}", a.base_url)).json(body);
    if let Some(k) = &a.api_key {
        req = req.bearer_auth(k);
    }
    let resp = match req.send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            rec.error = Some(format!(
                "{}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            ));
            return rec;
        }
        Err(e) => {
            rec.error = Some(e.to_string());
            return rec;
        }
    };
    let mut stream = resp.bytes_stream();
    let (mut buf, mut last, mut chunks) = (String::new(), None::<Instant>, 0usize);
    while let Some(bytes) = stream.next().await {
        let Ok(bytes) = bytes else {
            rec.error = Some("stream broken".into());
            return rec;
        };
        buf.push_str(&String::from_utf8_lossy(&bytes));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if let Some(e) = v.get("error") {
                rec.error = Some(e.to_string());
                return rec;
            }
            if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                rec.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0) as usize;
                rec.completion_tokens = u["completion_tokens"].as_u64().unwrap_or(0) as usize;
                rec.cached_tokens = u["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0) as usize;
            }
            let c = &v["choices"][0];
            let text = c["delta"]["content"]
                .as_str()
                .or(c["text"].as_str())
                .unwrap_or("");
            if !text.is_empty() {
                let now = Instant::now();
                match last {
                    None => rec.ttft = (now - start).as_secs_f64(),
                    Some(l) => rec.itl.push((now - l).as_secs_f64()),
                }
                last = Some(now);
                chunks += 1;
                rec.text.push_str(text);
            }
        }
    }
    rec.e2e = start.elapsed().as_secs_f64();
    if rec.completion_tokens == 0 {
        rec.completion_tokens = chunks;
    }
    rec.ok = true;
    rec
}

fn percentiles(mut v: Vec<f64>) -> Value {
    if v.is_empty() {
        return json!({"mean_ms": null, "p50_ms": null, "p90_ms": null, "p99_ms": null});
    }
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] * 1e3;
    json!({"mean_ms": v.iter().sum::<f64>() / v.len() as f64 * 1e3, "p50_ms": p(0.5), "p90_ms": p(0.9), "p99_ms": p(0.99)})
}

fn summarize(a: &Args, records: &[Record], duration: f64) -> Value {
    let ok: Vec<&Record> = records.iter().filter(|r| r.ok).collect();
    let out_tokens: usize = ok.iter().map(|r| r.completion_tokens).sum();
    let in_tokens: usize = ok.iter().map(|r| r.prompt_tokens).sum();
    let cached: usize = ok.iter().map(|r| r.cached_tokens).sum();
    let tpot = ok
        .iter()
        .filter(|r| r.completion_tokens > 1)
        .map(|r| (r.e2e - r.ttft) / (r.completion_tokens - 1) as f64)
        .collect();
    json!({
        "workload": format!("{:?}", a.workload).to_lowercase(),
        "model": a.model,
        "requests": records.len(),
        "succeeded": ok.len(),
        "failed": records.len() - ok.len(),
        "first_error": records.iter().find_map(|r| r.error.clone()),
        "duration_s": duration,
        "request_throughput": ok.len() as f64 / duration,
        "output_token_throughput": out_tokens as f64 / duration,
        "total_token_throughput": (in_tokens + out_tokens) as f64 / duration,
        "prompt_tokens": in_tokens,
        "completion_tokens": out_tokens,
        "cached_tokens": cached,
        "prefix_cache_hit_rate": if in_tokens > 0 { cached as f64 / in_tokens as f64 } else { 0.0 },
        "ttft": percentiles(ok.iter().map(|r| r.ttft).collect()),
        "tpot": percentiles(tpot),
        "itl": percentiles(ok.iter().flat_map(|r| r.itl.iter().copied()).collect()),
        "e2e": percentiles(ok.iter().map(|r| r.e2e).collect()),
    })
}

fn print_table(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    println!("{:=^64}", " kiln bench ");
    println!("{:<34}{}", "workload", r["workload"].as_str().unwrap_or(""));
    println!(
        "{:<34}{} ok / {} failed",
        "requests", r["succeeded"], r["failed"]
    );
    if let Some(e) = r["first_error"].as_str() {
        println!("{:<34}{}", "first error", e);
    }
    println!("{:<34}{:.2}", "duration (s)", f("duration_s"));
    println!(
        "{:<34}{:.3}",
        "request throughput (req/s)",
        f("request_throughput")
    );
    println!(
        "{:<34}{:.2}",
        "output token throughput (tok/s)",
        f("output_token_throughput")
    );
    println!(
        "{:<34}{:.2}",
        "total token throughput (tok/s)",
        f("total_token_throughput")
    );
    println!(
        "{:<34}{} in / {} out",
        "tokens", r["prompt_tokens"], r["completion_tokens"]
    );
    println!(
        "{:<34}{:.1}% ({} cached tokens)",
        "prefix cache hit rate",
        f("prefix_cache_hit_rate") * 100.0,
        r["cached_tokens"]
    );
    println!("{:-^64}", "");
    println!(
        "{:<10}{:>13}{:>13}{:>13}{:>13}",
        "(ms)", "mean", "p50", "p90", "p99"
    );
    for (name, key) in [
        ("TTFT", "ttft"),
        ("TPOT", "tpot"),
        ("ITL", "itl"),
        ("E2E", "e2e"),
    ] {
        let g = |k: &str| {
            r[key][k]
                .as_f64()
                .map_or("-".to_string(), |v| format!("{v:.1}"))
        };
        println!(
            "{name:<10}{:>13}{:>13}{:>13}{:>13}",
            g("mean_ms"),
            g("p50_ms"),
            g("p90_ms"),
            g("p99_ms")
        );
    }
    println!("{:=^64}", "");
}
