//! What `kiln bench` sends: independent synthetic prompts, or agent sessions.

use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::Semaphore;

use super::send::send;
use super::{Api, Args, Record};

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

pub async fn random_workload(
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

pub async fn agent_workload(
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
            const SYSTEM: &str = "You are an agent. Call tools, read their results, and continue.";
            let task = format!("Task {s}: {}", words(&mut rng, a.input_len));
            let mut messages = vec![
                json!({"role": "system", "content": SYSTEM}),
                json!({"role": "user", "content": task}),
            ];
            let (mut previous, mut records) = (None::<String>, Vec::new());
            for turn in 0..a.turns {
                let r = match a.api {
                    Api::Chat => {
                        let body = json!({
                            "model": a.model, "messages": messages, "max_tokens": a.output_len, "temperature": 0,
                            "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
                        });
                        send(&client, &a, "/v1/chat/completions", &body).await
                    }
                    Api::Responses => {
                        // Only what is new: the task, then each tool result.
                        let body = json!({
                            "model": a.model, "instructions": SYSTEM, "input": [messages.last()],
                            "previous_response_id": previous, "max_output_tokens": a.output_len,
                            "temperature": 0, "ignore_eos": true, "stream": true,
                        });
                        send(&client, &a, "/v1/responses", &body).await
                    }
                };
                bar.inc(1);
                previous = r.response_id.clone();
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
