//! `kiln serve`: the OpenAI-compatible HTTP server (see the kiln-server crate).

use kiln_engine::{EngineConfig, KvSize, LogprobsMode, LoraCapacity};
use kiln_frontend::ReasoningFormat;
use kiln_frontend::tools::ToolFormat;
use kiln_server::kv_transfer::{KvRole, KvTransferConfig};
use kiln_server::{Frontend, ServerConfig};

#[derive(clap::Args)]
pub struct Args {
    /// Model folder, GGUF file or Hugging Face repo id (default: the SmolLM2-135M-Instruct GGUF).
    #[arg(long)]
    model: Option<String>,
    /// The model as `vllm serve MODEL` takes it (the same as --model).
    #[arg(value_name = "MODEL", conflicts_with = "model")]
    model_tag: Option<String>,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Require `Authorization: Bearer KEY` on the API routes.
    #[arg(long)]
    api_key: Option<String>,
    #[arg(long, default_value_t = 2048)]
    max_num_batched_tokens: usize,
    #[arg(long, default_value_t = 256)]
    max_num_seqs: usize,
    /// Bytes of GPU memory for the KV cache.
    #[arg(long, default_value_t = 512 << 20, conflicts_with = "kv_blocks")]
    kv_memory: u64,
    /// KV cache size in blocks (instead of --kv-memory).
    #[arg(long)]
    kv_blocks: Option<usize>,
    /// Share of the device's memory (0 to 1) for the whole engine, weights and step
    /// buffers included, the KV cache taking what they leave (instead of --kv-memory; vLLM's
    /// knob). Vulkan devices only: the others do not report their memory.
    #[arg(long, conflicts_with_all = ["kv_blocks", "kv_memory"])]
    gpu_memory_utilization: Option<f64>,
    /// Bytes of host memory for the CPU tier of cold KV blocks (0: off).
    #[arg(long, default_value_t = 0)]
    cpu_kv_bytes: u64,
    /// Also keep cached KV blocks in files here, below the CPU tier: a prompt's blocks
    /// evicted from memory, or computed before a restart, are read back instead of computed
    /// again (needs --cpu-kv-bytes, through which they come back).
    #[arg(long)]
    kv_disk_dir: Option<std::path::PathBuf>,
    /// Most bytes the KV disk tier keeps, least recently used removed first.
    #[arg(long, default_value_t = 16 << 30, requires = "kv_disk_dir")]
    kv_disk_bytes: u64,
    #[arg(long)]
    no_prefix_caching: bool,
    /// The model name clients use (default: the model file or folder name); more names after
    /// it are aliases requests may give too (responses use the first), as vLLM's.
    #[arg(long, num_args = 1..)]
    served_model_name: Vec<String>,
    /// Longest sequence (default: the model's context length).
    #[arg(long)]
    max_model_len: Option<usize>,
    /// Queued requests beyond which new ones get 503.
    #[arg(long, default_value_t = 1024)]
    max_waiting: usize,
    /// Seconds a shutdown (SIGTERM/SIGINT) waits for running requests before exiting.
    #[arg(long, default_value_t = 30)]
    shutdown_timeout: u64,
    /// Serve vLLM's `POST /sleep`, `POST /wake_up` and `GET /is_sleeping` (behind the API
    /// key): the engine gives its GPU memory back while asleep; a request wakes it.
    #[arg(long)]
    enable_sleep_mode: bool,
    /// Put the engine to sleep after this many seconds without requests (its GPU memory
    /// given back, as Ollama's keep-alive does); the next request wakes it.
    #[arg(long, value_name = "SECONDS")]
    sleep_after_idle: Option<f64>,
    /// Publish KV-cache events over ZeroMQ PUB here (e.g. `tcp://*:5557`), for prefix-aware
    /// routers (llm-d's KV-cache indexer); topic `kv@<$POD_NAME or hostname>@<served name>`.
    #[arg(long)]
    kv_events_endpoint: Option<String>,
    /// The ROUTER socket that replays buffered KV events from a sequence number.
    #[arg(long, requires = "kv_events_endpoint")]
    kv_events_replay_endpoint: Option<String>,
    /// KV-event messages kept for replay.
    #[arg(long, default_value_t = 10_000)]
    kv_events_buffer: usize,
    #[command(flatten)]
    device: crate::device_args::DeviceArgs,
    #[command(flatten)]
    api_defaults: crate::api_args::ApiDefaults,
    /// Folder of the browser demo, served at /demo/ (built by scripts/build-web.sh).
    #[arg(long, default_value = "web-demo")]
    demo_dir: std::path::PathBuf,
    /// What reported log-probabilities describe: `raw` (the model's logits, as vLLM) or
    /// `processed` (after penalties, temperature and token masks).
    #[arg(long, value_enum, default_value_t = LogprobsModeArg::Raw)]
    logprobs_mode: LogprobsModeArg,
    /// How chat replies' reasoning is set apart into `reasoning_content`: `auto`
    /// (`harmony` where the model's chat template writes gpt-oss's channels, `think` where
    /// it knows `<think>` and `</think>`), `think`, `harmony`, or `none` (replies as
    /// written, reasoning in `content`).
    #[arg(long, value_enum, default_value_t = ReasoningArg::Auto)]
    reasoning_parser: ReasoningArg,
    /// How tool calls are written and read (vLLM's names): `auto` (from the chat template),
    /// `hermes`, `llama3_json`, `mistral`, `pythonic` (or `llama4_pythonic`), `glm45` (or
    /// `glm47`), `openai` (gpt-oss's harmony messages), or `kiln` (its
    /// own JSON, the tools described in a system message). A model's own format needs a chat
    /// template that renders the tools.
    #[arg(long, default_value = "auto", value_name = "NAME")]
    tool_call_parser: String,
    /// Where requests' sampling defaults come from (vLLM's flag): `auto`, the model's own
    /// (generation_config.json or GGUF metadata); `vllm`, none (kiln's then apply); or a
    /// folder whose generation_config.json is read.
    #[arg(long, default_value = "auto", value_name = "auto|vllm|FOLDER")]
    generation_config: String,
    /// Sampling defaults set over those (vLLM's flag), as JSON: `temperature`, `top_p`,
    /// `top_k`, `min_p`, `repetition_penalty`.
    #[arg(long, value_name = "JSON")]
    override_generation_config: Option<String>,
    /// Web pages of these origins may call the API from a browser (CORS; `*` for any), as
    /// vLLM's flag; by default none.
    #[arg(long, num_args = 1.., value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// Send every response's `X-Request-Id` header back: the request's own, or one made for
    /// it (vLLM's flag); the log line of each request names it.
    #[arg(long)]
    enable_request_id_headers: bool,
    /// Accepted for vLLM's command lines: `tool_choice` `auto` is always served.
    #[arg(long)]
    enable_auto_tool_choice: bool,
    /// A chat template instead of the model's (vLLM's flag): a file, or the Jinja template
    /// itself. Tool-call and reasoning formats are read from it.
    #[arg(long)]
    chat_template: Option<String>,
    /// Most responses `/v1/responses` keeps in memory for `previous_response_id` and `GET`,
    /// oldest forgotten first (0: none; requests then need `store: false`).
    #[arg(long, default_value_t = 1024)]
    responses_store: usize,
    /// Also write stored responses to this directory and read them back from it: they
    /// outlive a restart, and servers given the same directory share them.
    #[arg(long)]
    responses_dir: Option<std::path::PathBuf>,
    /// `fcfs` serves requests in arrival order; `priority` orders waiting requests by their
    /// `priority` field (lower first, then arrival) and preempts the lowest first.
    #[arg(long, value_enum, default_value_t = SchedulingPolicy::Fcfs)]
    scheduling_policy: SchedulingPolicy,
    /// This server's side of a prefill/decode pair: `producer` prefills requests marked
    /// `kv_transfer_params.do_remote_decode` and serves their KV blocks; `consumer` fetches
    /// the blocks of requests marked `do_remote_prefill` into its CPU tier (needs
    /// --cpu-kv-bytes). See `kiln pd-proxy`.
    #[arg(long, value_enum)]
    kv_role: Option<KvRoleArg>,
    /// Producer: the host decode servers reach this server at (default: --host, unless that
    /// is a wildcard address such as 0.0.0.0, which must be replaced, e.g. by the pod IP).
    #[arg(long)]
    kv_transfer_host: Option<String>,
    /// Producer: seconds a finished request's blocks stay pinned for a decode server.
    #[arg(long, default_value_t = 60)]
    kv_transfer_ttl: u64,
    /// LoRA adapters requests may name as their `model` (vLLM's flag): `NAME=PATH`, or
    /// vLLM's JSON form `{"name": ..., "path": ..., "base_model_name": ...}` (the base, if
    /// given, must be the served model), each a folder as PEFT saves an adapter
    /// (adapter_config.json, adapter_model.safetensors) or a GGUF adapter file as llama.cpp's
    /// converter writes one; several after one flag or the flag repeated. Requests through
    /// different adapters and through none share each step.
    #[arg(long, num_args = 1.., value_parser = crate::lora_modules::parse)]
    lora_modules: Vec<crate::lora_modules::LoraModule>,
    /// vLLM's switch for LoRA: room on the GPU for --max-loras adapters (8 by default; vLLM's
    /// default is 1) of rank up to --max-lora-rank. Not needed for --lora-modules, which
    /// without it each get a slot of their exact rank.
    #[arg(long)]
    enable_lora: bool,
    /// Serve vLLM's `POST /v1/load_lora_adapter` and `/v1/unload_lora_adapter` (behind the
    /// API key): adapters loaded from a folder the request names while the server runs. Every
    /// projection then has room for --max-loras adapters of rank --max-lora-rank, and the
    /// rotary step and gated activation run as launches of their own for every request.
    /// vLLM's environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=True does the same.
    #[arg(long, env = "VLLM_ALLOW_RUNTIME_LORA_UPDATING", value_parser = clap::builder::BoolishValueParser::new())]
    allow_runtime_lora_updating: bool,
    /// Adapters on the GPU at once (at most 32; 8 with --enable-lora or
    /// --allow-runtime-lora-updating, else one per --lora-modules adapter): a step's requests run through at most this many, and
    /// an adapter a waiting request needs is written into the slot of one no running request
    /// uses, least recently used first. Any number of adapters may be loaded.
    #[arg(long)]
    max_loras: Option<usize>,
    /// Largest rank of each adapted matrix of an adapter written into a slot, with
    /// --max-loras, --enable-lora or --allow-runtime-lora-updating.
    #[arg(long, default_value_t = 16)]
    max_lora_rank: usize,
    /// Most adapters whose values stay in host memory (vLLM's flag): beyond it, those used
    /// least recently that no request needs let go of theirs, and are read again from their
    /// files when a request names one. No limit by default.
    #[arg(long)]
    max_cpu_loras: Option<usize>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum KvRoleArg {
    Producer,
    Consumer,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SchedulingPolicy {
    Fcfs,
    Priority,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReasoningArg {
    Auto,
    Think,
    Harmony,
    None,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogprobsModeArg {
    Raw,
    Processed,
}

/// The prefill/decode settings, checked before the model loads.
fn kv_transfer(a: &Args) -> anyhow::Result<Option<KvTransferConfig>> {
    let Some(role) = a.kv_role else {
        anyhow::ensure!(
            a.kv_transfer_host.is_none(),
            "--kv-transfer-host is for a producer (--kv-role producer)"
        );
        return Ok(None);
    };
    let role = match role {
        KvRoleArg::Producer => KvRole::Producer,
        KvRoleArg::Consumer => KvRole::Consumer,
    };
    anyhow::ensure!(
        role == KvRole::Producer || a.cpu_kv_bytes > 0,
        "--kv-role consumer stores fetched KV blocks in the CPU tier: set --cpu-kv-bytes (e.g. 4294967296)"
    );
    let host = a.kv_transfer_host.clone().unwrap_or_else(|| a.host.clone());
    let wildcard = host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified());
    anyhow::ensure!(
        role == KvRole::Consumer || !wildcard,
        "--kv-role producer listening on {host}: give --kv-transfer-host, the address decode servers reach it at"
    );
    Ok(Some(KvTransferConfig {
        role,
        host,
        ttl: std::time::Duration::from_secs(a.kv_transfer_ttl),
    }))
}

pub fn run(mut a: Args) -> anyhow::Result<()> {
    if a.model.is_none() {
        a.model = a.model_tag.take();
    }
    // --served-model-name takes every value after it: a model written after the names is
    // one more name, and the default model would be served under them.
    if a.model.is_none()
        && let Some(n) = (a.served_model_name.iter()).find(|n| std::path::Path::new(n).exists())
    {
        anyhow::bail!(
            "`{n}` after --served-model-name is taken as a name for the model, and no model is given: put MODEL before --served-model-name, or give it as --model"
        );
    }
    let kv_transfer = kv_transfer(&a)?;
    anyhow::ensure!(
        a.kv_disk_dir.is_none() || a.cpu_kv_bytes > 0,
        "--kv-disk-dir brings blocks back through the CPU tier: set --cpu-kv-bytes too (e.g. 4294967296)"
    );
    anyhow::ensure!(
        a.kv_disk_dir.is_none() || !a.no_prefix_caching,
        "--kv-disk-dir keeps the prefix cache's blocks: it needs prefix caching (drop --no-prefix-caching)"
    );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let model_path = crate::model_path::resolve(a.model.as_deref())?;
    let model = crate::model_path::load_with_template(
        Some(&model_path.to_string_lossy()),
        a.chat_template.as_deref(),
    )?;
    let path = &model_path;
    let name = a.served_model_name.first().cloned().unwrap_or_else(|| {
        a.model.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "kiln".into())
        })
    });
    tracing::info!(
        "model {} ({} layers, vocab {}), served as `{name}`",
        model.source,
        model.config.num_layers,
        model.config.vocab_size
    );
    let served = (a.served_model_name.iter().chain(&a.model)).chain([&name]);
    let lora =
        crate::lora_modules::load(&a.lora_modules, &served.collect::<Vec<_>>(), &model.config)?;
    let kv_disk = match &a.kv_disk_dir {
        Some(dir) => Some(kiln_engine::disk_tier::DiskTierConfig {
            dir: dir.clone(),
            max_bytes: a.kv_disk_bytes,
            model_id: kiln_engine::disk_tier::model_files_id(&model_path)
                .map_err(|e| anyhow::anyhow!("{}: {e}", model_path.display()))?,
        }),
        None => None,
    };
    let (mut info, config, weights) = Frontend::split(model);
    info.defaults = crate::generation_config::defaults(&a.generation_config, info.defaults)?;
    if let Some(json) = &a.override_generation_config {
        info.defaults = crate::generation_config::overridden(info.defaults, json)?;
    }
    if !info.defaults.is_empty() {
        tracing::info!("sampling defaults: {}", info.defaults.describe().join(", "));
    }
    info.tool_format = ToolFormat::named(
        &a.tool_call_parser,
        info.chat_template.as_ref(),
        &info.tokenizer,
    )
    .map_err(|e| anyhow::anyhow!("--tool-call-parser {e}"))?;
    if a.enable_auto_tool_choice {
        tracing::info!("--enable-auto-tool-choice: tool_choice `auto` is always served");
    }
    let ec = a.device.apply(EngineConfig {
        max_num_batched_tokens: a.max_num_batched_tokens,
        max_num_seqs: a.max_num_seqs,
        kv: match (a.gpu_memory_utilization, a.kv_blocks) {
            (Some(share), _) => KvSize::DeviceShare(share),
            (None, Some(n)) => KvSize::Blocks(n),
            (None, None) => KvSize::Bytes(a.kv_memory),
        },
        cpu_kv_bytes: a.cpu_kv_bytes,
        enable_prefix_caching: !a.no_prefix_caching,
        max_model_len: a.max_model_len,
        lora,
        lora_capacity: (a.enable_lora || a.allow_runtime_lora_updating || a.max_loras.is_some())
            .then_some(LoraCapacity {
                slots: a.max_loras.unwrap_or(8),
                rank: a.max_lora_rank,
            }),
        max_cpu_loras: a.max_cpu_loras,
        ..EngineConfig::default()
    });
    let pod = std::env::var("POD_NAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "kiln".into());
    let kv_events =
        a.kv_events_endpoint
            .clone()
            .map(|endpoint| kiln_server::kv_events::KvEventsConfig {
                endpoint,
                replay_endpoint: a.kv_events_replay_endpoint.clone(),
                topic: format!("kv@{pod}@{name}"),
                buffer: a.kv_events_buffer,
            });
    let mut sc = ServerConfig {
        kv_events,
        host: a.host,
        port: a.port,
        api_key: a.api_key,
        served_model_name: name,
        model_aliases: a.served_model_name.iter().skip(1).cloned().collect(),
        max_waiting: a.max_waiting,
        demo: demo_files(&a.demo_dir, &model_path),
        shutdown_timeout: std::time::Duration::from_secs(a.shutdown_timeout),
        logprobs_mode: match a.logprobs_mode {
            LogprobsModeArg::Raw => LogprobsMode::Raw,
            LogprobsModeArg::Processed => LogprobsMode::Processed,
        },
        kv_transfer,
        reasoning: match a.reasoning_parser {
            ReasoningArg::Auto => None,
            ReasoningArg::Think => Some(ReasoningFormat::Think),
            ReasoningArg::Harmony => Some(ReasoningFormat::Harmony),
            ReasoningArg::None => Some(ReasoningFormat::None),
        },
        responses_store: a.responses_store,
        responses_dir: a.responses_dir,
        priority_scheduling: a.scheduling_policy == SchedulingPolicy::Priority,
        kv_disk,
        sleep_mode: a.enable_sleep_mode,
        runtime_lora_updating: a.allow_runtime_lora_updating,
        request_id_headers: a.enable_request_id_headers,
        allowed_origins: a.allowed_origins.clone(),
        sleep_after_idle: match a.sleep_after_idle {
            Some(s) if !(s.is_finite() && s > 0.0) => {
                anyhow::bail!("--sleep-after-idle {s}: a number of seconds above 0")
            }
            s => s.map(std::time::Duration::from_secs_f64),
        },
        ..ServerConfig::default()
    };
    a.api_defaults.apply(&mut sc);
    let factory = kiln_server::gpu_engine_factory(config, weights, ec);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(kiln_server::serve(sc, info, factory))
}

/// The demo page, when its folder exists; the served model goes with it if it is a GGUF file.
fn demo_files(dir: &std::path::Path, model: &std::path::Path) -> Option<kiln_server::DemoFiles> {
    if !dir.join("index.html").exists() {
        return None;
    }
    if !dir.join("pkg").exists() {
        tracing::warn!(
            "{}/pkg is missing: run scripts/build-web.sh for the /demo page",
            dir.display()
        );
    }
    let model_file = (model.extension().is_some_and(|e| e == "gguf")).then(|| model.to_path_buf());
    Some(kiln_server::DemoFiles {
        page_dir: dir.to_path_buf(),
        model_file,
    })
}
