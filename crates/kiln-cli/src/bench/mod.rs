//! `kiln bench`: a benchmark client for any OpenAI-compatible server. Synthetic prompts at a
//! fixed request rate or concurrency, or an agent loop (sessions of many turns whose prompt is
//! the whole conversation so far plus a tool result, through chat or the Responses API).
//! Streams every request (`send.rs`) and reports TTFT, time per output token, inter-token
//! latency, end-to-end latency, throughput and the prefix-cache hit rate, as a table and
//! optionally as JSON (`report.rs`).

mod report;
mod send;
mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use report::{print_table, summarize};
use workloads::{agent_workload, random_workload};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Independent requests with synthetic prompts of --input-len words.
    Random,
    /// --sessions conversations of --turns turns each.
    Agent,
}

/// The API the agent workload's sessions speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `/v1/chat/completions`, the whole conversation sent every turn.
    Chat,
    /// `/v1/responses`, each turn continuing the last response (`previous_response_id`)
    /// with only the new tool result.
    Responses,
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
    /// The agent workload's API.
    #[arg(long, value_enum, default_value = "chat")]
    api: Api,
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
pub struct Record {
    ok: bool,
    error: Option<String>,
    ttft: f64,
    itl: Vec<f64>,
    e2e: f64,
    prompt_tokens: usize,
    completion_tokens: usize,
    cached_tokens: usize,
    text: String,
    /// The Responses API's id for the reply (what the next turn continues).
    response_id: Option<String>,
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
