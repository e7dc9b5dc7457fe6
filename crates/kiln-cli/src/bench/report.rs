//! The numbers a run's records give, as JSON and as a table.

use serde_json::{Value, json};

use super::{Args, Record};

fn percentiles(mut v: Vec<f64>) -> Value {
    if v.is_empty() {
        return json!({"mean_ms": null, "p50_ms": null, "p90_ms": null, "p99_ms": null});
    }
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] * 1e3;
    json!({"mean_ms": v.iter().sum::<f64>() / v.len() as f64 * 1e3, "p50_ms": p(0.5), "p90_ms": p(0.9), "p99_ms": p(0.99)})
}

pub fn summarize(a: &Args, records: &[Record], duration: f64) -> Value {
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
        "api": match a.workload {
            super::Workload::Agent => json!(format!("{:?}", a.api).to_lowercase()),
            super::Workload::Random => json!("completions"),
        },
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

pub fn print_table(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    println!("{:=^64}", " kiln bench ");
    println!(
        "{:<34}{} ({})",
        "workload",
        r["workload"].as_str().unwrap_or(""),
        r["api"].as_str().unwrap_or("")
    );
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
