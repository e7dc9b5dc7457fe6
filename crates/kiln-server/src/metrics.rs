//! Server metrics in the Prometheus text format: request counters and latency histograms kept
//! here, scheduler gauges and counters read from the engine thread's last snapshot.

use std::fmt::Write;
use std::sync::Mutex;

use kiln_engine::SchedulerStats;
use kiln_engine::disk_tier::DiskTierStats;

use crate::engine_loop::EngineInfo;
use crate::health::Health;

const LATENCY_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0,
];

#[derive(Clone, Debug, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; LATENCY_BUCKETS.len()];
        }
        for (c, &b) in self.counts.iter_mut().zip(LATENCY_BUCKETS) {
            if v <= b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in LATENCY_BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{b}\"}} {}",
                self.counts.get(i).copied().unwrap_or(0)
            );
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

#[derive(Default)]
struct Inner {
    finished: [u64; 3],
    errors: u64,
    rejected: u64,
    prompt_tokens: u64,
    generation_tokens: u64,
    ttft: Histogram,
    tpot: Histogram,
    e2e: Histogram,
    /// Consumer: transfers whose blocks were stored / that failed (prefilled instead).
    kv_transfers: [u64; 2],
    /// Producer: blocks sent to decode servers.
    kv_exported_blocks: u64,
}

/// How a sequence ended, for the request counter.
#[derive(Clone, Copy)]
pub enum Outcome {
    Stop = 0,
    Length = 1,
    Abort = 2,
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    pub fn kv_transfer(&self, ok: bool) {
        self.inner.lock().unwrap().kv_transfers[usize::from(!ok)] += 1;
    }

    pub fn kv_exported(&self, blocks: usize) {
        self.inner.lock().unwrap().kv_exported_blocks += blocks as u64;
    }

    pub fn generated_token(&self) {
        self.inner.lock().unwrap().generation_tokens += 1;
    }

    pub fn prompt(&self, tokens: usize) {
        self.inner.lock().unwrap().prompt_tokens += tokens as u64;
    }

    pub fn error(&self) {
        self.inner.lock().unwrap().errors += 1;
    }

    pub fn rejected(&self) {
        self.inner.lock().unwrap().rejected += 1;
    }

    /// A finished sequence: time to first token, per output token after it, end to end.
    pub fn finished(&self, outcome: Outcome, ttft_s: Option<f64>, e2e_s: f64, num_tokens: usize) {
        let mut m = self.inner.lock().unwrap();
        m.finished[outcome as usize] += 1;
        if let Some(t) = ttft_s {
            m.ttft.observe(t);
            if num_tokens > 1 {
                m.tpot.observe((e2e_s - t) / (num_tokens - 1) as f64);
            }
        }
        m.e2e.observe(e2e_s);
    }

    pub fn render(
        &self,
        s: &SchedulerStats,
        disk: Option<DiskTierStats>,
        info: &EngineInfo,
        health: &Health,
        lora: &kiln_engine::LoraRequests,
    ) -> String {
        let m = self.inner.lock().unwrap();
        let mut out = String::new();
        // The cache geometry for the gateway's prefix-aware routing (vLLM's cache_config_info).
        let name = "kiln_cache_config_info";
        let _ = writeln!(
            out,
            "# HELP {name} KV cache geometry: tokens per block, GPU blocks in the pool and their element type.\n# TYPE {name} gauge"
        );
        let _ = writeln!(
            out,
            "{name}{{block_size=\"{}\",num_gpu_blocks=\"{}\",cache_dtype=\"{}\"}} 1",
            kiln_core::BLOCK_SIZE,
            info.num_gpu_blocks,
            info.kv_layout.dtype
        );
        // Which adapters requests run through and wait for (vLLM's lora_requests_info).
        if lora.slots > 0 {
            let name = "kiln_lora_requests_info";
            let list = |names: &[String]| label_value(&names.join(","));
            let _ = writeln!(
                out,
                "# HELP {name} LoRA adapters of running requests and of waiting ones, and the GPU's adapter slots.\n# TYPE {name} gauge\n{name}{{max_lora=\"{}\",running_lora_adapters=\"{}\",waiting_lora_adapters=\"{}\"}} 1",
                lora.slots,
                list(&lora.running),
                list(&lora.waiting)
            );
        }
        let mut metric = |name: &str, kind: &str, help: &str, v: f64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        };
        let up = health.check().is_ok();
        metric(
            "kiln_up",
            "gauge",
            "1 when the server takes requests (engine up, not draining), else 0.",
            f64::from(u8::from(up)),
        );
        let failed = health
            .failed_steps
            .load(std::sync::atomic::Ordering::Relaxed);
        metric(
            "kiln_step_failures_total",
            "counter",
            "Engine steps that failed (their requests got an error).",
            failed as f64,
        );
        let restarts = health
            .engine_restarts
            .load(std::sync::atomic::Ordering::Relaxed);
        metric(
            "kiln_engine_restarts_total",
            "counter",
            "Times the engine was rebuilt (lost device, panic).",
            restarts as f64,
        );
        let sleeping = health.sleeping.load(std::sync::atomic::Ordering::SeqCst);
        metric(
            "kiln_engine_sleeping",
            "gauge",
            "1 while the engine sleeps (its GPU memory given back), else 0.",
            f64::from(u8::from(sleeping)),
        );
        let sleeps = health.sleeps.load(std::sync::atomic::Ordering::Relaxed);
        metric(
            "kiln_engine_sleeps_total",
            "counter",
            "Times the engine went to sleep (asked, or idle).",
            sleeps as f64,
        );
        metric(
            "kiln_num_requests_running",
            "gauge",
            "Requests running on the GPU.",
            s.num_running as f64,
        );
        metric(
            "kiln_num_requests_waiting",
            "gauge",
            "Requests waiting to be scheduled.",
            s.num_waiting as f64,
        );
        metric(
            "kiln_kv_blocks_total",
            "gauge",
            "GPU KV cache blocks in the pool.",
            info.num_gpu_blocks as f64,
        );
        metric(
            "kiln_kv_blocks_used",
            "gauge",
            "GPU KV cache blocks in use.",
            s.kv_blocks_used as f64,
        );
        metric(
            "kiln_penalty_pages_total",
            "gauge",
            "Pages of the penalty pool (kiln_core::PENALTY_PAGE entries each) that running requests' penalty lists share.",
            (info.max_penalty_entries / kiln_core::PENALTY_PAGE) as f64,
        );
        metric(
            "kiln_penalty_pages_used",
            "gauge",
            "Pages of the penalty pool held by running requests with penalties or a logit bias.",
            s.penalty_pages_used as f64,
        );
        metric(
            "kiln_kv_blocks_free",
            "gauge",
            "GPU KV cache blocks free (cached ones included).",
            s.kv_blocks_free as f64,
        );
        metric(
            "kiln_kv_blocks_cached",
            "gauge",
            "GPU KV cache blocks holding a prefix-cache entry.",
            s.kv_blocks_cached as f64,
        );
        metric(
            "kiln_prefill_tokens_total",
            "counter",
            "Prompt (and recomputed) tokens run through prefill; prefix-cache hits are not.",
            s.total_prefill_tokens as f64,
        );
        metric(
            "kiln_kv_blocks_pinned",
            "gauge",
            "GPU KV cache blocks pinned for a decode server to fetch.",
            s.kv_blocks_pinned as f64,
        );
        metric(
            "kiln_kv_transfer_imported_blocks_total",
            "counter",
            "KV blocks fetched from a prefill server and stored in the CPU tier.",
            s.imported_blocks as f64,
        );
        let usage = s.kv_blocks_used as f64 / info.num_gpu_blocks.max(1) as f64;
        metric(
            "kiln_kv_cache_usage_perc",
            "gauge",
            "Fraction of GPU KV blocks in use.",
            usage,
        );
        metric(
            "kiln_prefix_cache_queries_total",
            "counter",
            "Prompt tokens looked up in the prefix cache.",
            s.prefix_cache_queries as f64,
        );
        metric(
            "kiln_prefix_cache_hits_total",
            "counter",
            "Prompt tokens found in the prefix cache.",
            s.prefix_cache_hits as f64,
        );
        metric(
            "kiln_num_preemptions_total",
            "counter",
            "Preemptions.",
            s.num_preemptions as f64,
        );
        metric(
            "kiln_kv_blocks_window_released_total",
            "counter",
            "KV blocks given back by running requests behind every layer's sliding window.",
            s.window_released_blocks as f64,
        );
        metric(
            "kiln_lora_loads_total",
            "counter",
            "LoRA adapters written into a GPU slot for the requests of a step (more adapters loaded than slots).",
            s.lora_loads as f64,
        );
        metric(
            "kiln_lora_reads_total",
            "counter",
            "LoRA adapters read again from their files, having let go of their values (--max-cpu-loras).",
            s.lora_reads as f64,
        );
        metric(
            "kiln_spec_decode_num_draft_tokens_total",
            "counter",
            "Guesses of decodes' next tokens computed (speculative decoding by prompt lookup).",
            s.spec_draft_tokens as f64,
        );
        metric(
            "kiln_spec_decode_num_accepted_tokens_total",
            "counter",
            "Guesses the model's own draws confirmed.",
            s.spec_accepted_tokens as f64,
        );
        metric(
            "kiln_cpu_blocks_stored_total",
            "counter",
            "KV blocks copied to the CPU tier.",
            s.cpu_blocks_stored as f64,
        );
        metric(
            "kiln_cpu_blocks_restored_total",
            "counter",
            "KV blocks restored from the CPU tier.",
            s.cpu_blocks_restored as f64,
        );
        metric(
            "kiln_cpu_blocks_resident",
            "gauge",
            "KV blocks held by the CPU tier.",
            s.cpu_blocks_resident as f64,
        );
        if let Some(d) = disk {
            metric(
                "kiln_kv_disk_blocks_written_total",
                "counter",
                "KV blocks written to the disk tier.",
                d.blocks_written as f64,
            );
            metric(
                "kiln_kv_disk_blocks_restored_total",
                "counter",
                "KV blocks read back from the disk tier into the CPU tier.",
                d.blocks_restored as f64,
            );
            metric(
                "kiln_kv_disk_blocks_evicted_total",
                "counter",
                "KV block files removed to keep the disk tier within its size.",
                d.blocks_evicted as f64,
            );
            metric(
                "kiln_kv_disk_blocks_resident",
                "gauge",
                "KV blocks held by the disk tier.",
                d.blocks_resident as f64,
            );
            metric(
                "kiln_kv_disk_bytes_resident",
                "gauge",
                "Bytes of the disk tier's files.",
                d.bytes_resident as f64,
            );
            metric(
                "kiln_kv_disk_blocks_pending",
                "gauge",
                "Cached KV blocks waiting to be written to the disk tier.",
                d.pending as f64,
            );
        }
        metric(
            "kiln_prompt_tokens_total",
            "counter",
            "Prompt tokens received.",
            m.prompt_tokens as f64,
        );
        metric(
            "kiln_generation_tokens_total",
            "counter",
            "Tokens generated.",
            m.generation_tokens as f64,
        );
        metric(
            "kiln_request_errors_total",
            "counter",
            "Requests that failed in the engine.",
            m.errors as f64,
        );
        metric(
            "kiln_kv_transfers_total",
            "counter",
            "Consumer: KV transfers whose blocks were stored.",
            m.kv_transfers[0] as f64,
        );
        metric(
            "kiln_kv_transfer_failures_total",
            "counter",
            "Consumer: KV transfers that failed (the prompt was prefilled here instead).",
            m.kv_transfers[1] as f64,
        );
        metric(
            "kiln_kv_exported_blocks_total",
            "counter",
            "Producer: KV blocks sent to decode servers.",
            m.kv_exported_blocks as f64,
        );
        metric(
            "kiln_request_rejected_total",
            "counter",
            "Requests refused because the queue was full.",
            m.rejected as f64,
        );
        let name = "kiln_request_success_total";
        let _ = writeln!(
            out,
            "# HELP {name} Sequences finished, by reason.\n# TYPE {name} counter"
        );
        for (i, reason) in ["stop", "length", "abort"].iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}{{finished_reason=\"{reason}\"}} {}",
                m.finished[i]
            );
        }
        m.ttft.render(
            &mut out,
            "kiln_time_to_first_token_seconds",
            "Time to first token.",
        );
        m.tpot.render(
            &mut out,
            "kiln_time_per_output_token_seconds",
            "Time per output token after the first.",
        );
        m.e2e.render(
            &mut out,
            "kiln_e2e_request_latency_seconds",
            "End-to-end sequence latency.",
        );
        out
    }
}

/// `v` as a Prometheus label value: backslashes, quotes and line breaks escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
