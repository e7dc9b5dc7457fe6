//! kiln's OpenAI-compatible server. Three layers, as in vLLM:
//! - HTTP handlers on tokio (`routes`): parse and validate, tokenize, then for each sequence
//!   detokenize and match stop strings as tokens arrive (`generate`, `stop`, `sse`);
//! - one engine thread (`engine_loop`) that owns the [`kiln_engine::Engine`] and steps it,
//!   fed by a channel of add/abort commands, answering on per-request channels;
//! - the engine itself (scheduler + GPU runner).
//!
//! Files: `api` (request types), `error` (OpenAI errors, JSON extractor), `state` (shared
//! state, validation), `metrics` (Prometheus text), `health` (up/down/draining, reliability
//! counters), `kv_events` (KV-cache events over ZeroMQ), `disk_tier` (cached KV blocks
//! kept on disk).
//!
//! Shutdown is graceful: on SIGTERM/SIGINT (or [`ShutdownHandle::shutdown`]) `/health` and new
//! generation requests answer 503 at once, running sequences finish (bounded by
//! `shutdown_timeout`), then the listener closes and [`Server::wait`] returns `Ok`.

mod api;
pub mod beam_search;
mod compile;
mod demo;
mod disk_tier;
mod engine_loop;
mod error;
mod generate;
mod health;
pub mod kv_events;
pub mod kv_transfer;
mod messages;
mod metrics;
pub mod pd_proxy;
pub mod request_log;
mod responses;
mod router;
mod routes;
mod sse;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use demo::DemoFiles;
pub use engine_loop::{CacheReset, EngineFactory, EngineHandle, EngineInfo, SeqEvent};
pub use error::ApiError;
pub use kiln_frontend::Frontend;
pub use routes::render::TEMPLATE_REQUEST_FIELDS;

use kiln_frontend::ReasoningFormat;
use state::AppState;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
    /// When set, `/v1/*`, `/tokenize` and `/detokenize` need `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    pub served_model_name: String,
    /// More names requests may give as their `model` for the served model (vLLM's further
    /// `--served-model-name`s); responses name it `served_model_name`.
    pub model_aliases: Vec<String>,
    /// Requests queued (waiting in the scheduler or not yet admitted) beyond which new ones
    /// get 503 with Retry-After.
    pub max_waiting: usize,
    pub max_body_bytes: usize,
    /// The browser demo, served under `/demo/` when set.
    pub demo: Option<DemoFiles>,
    /// How long a shutdown waits for running sequences before closing anyway.
    pub shutdown_timeout: Duration,
    /// Publish KV-cache events over ZeroMQ when set.
    pub kv_events: Option<kv_events::KvEventsConfig>,
    /// What reported log-probabilities describe (raw model logits by default, as vLLM).
    pub logprobs_mode: kiln_engine::LogprobsMode,
    /// This server's side of a prefill/decode pair, when it is one.
    pub kv_transfer: Option<kv_transfer::KvTransferConfig>,
    /// How replies' reasoning is set apart (`reasoning_content`); `None`: read from the
    /// model's chat template.
    pub reasoning: Option<kiln_frontend::ReasoningFormat>,
    /// Most responses `/v1/responses` keeps in memory for `previous_response_id` (oldest
    /// forgotten first; 0 keeps none there).
    pub responses_store: usize,
    /// Where stored responses are also written and read back from (they outlive a restart
    /// and are shared by servers given the same directory); `None`: memory only.
    pub responses_dir: Option<std::path::PathBuf>,
    /// Whether requests may set `priority` (vLLM's `--scheduling-policy priority`); the
    /// scheduler orders by it either way, all requests having 0 otherwise.
    pub priority_scheduling: bool,
    /// Where cached KV blocks are also kept on disk (they outlive their eviction from memory
    /// and the process); `None`: memory only.
    pub kv_disk: Option<kiln_engine::disk_tier::DiskTierConfig>,
    /// vLLM's `/sleep`, `/wake_up` and `/is_sleeping` (`--enable-sleep-mode`).
    pub sleep_mode: bool,
    /// vLLM's `/v1/load_lora_adapter` and `/v1/unload_lora_adapter`
    /// (`--allow-runtime-lora-updating`; the engine needs room for adapters,
    /// [`kiln_engine::EngineConfig::lora_capacity`]).
    pub runtime_lora_updating: bool,
    /// The engine sleeps after this long without requests (`--sleep-after-idle`).
    pub sleep_after_idle: Option<Duration>,
    /// Web pages of these origins may call the API from a browser (CORS; `*` for any), as
    /// vLLM's `--allowed-origins`; empty: none (no CORS headers).
    pub allowed_origins: Vec<String>,
    /// Every response carries an `X-Request-Id` header, the request's own or one made for it
    /// (vLLM's `--enable-request-id-headers`); the log line names it.
    pub request_id_headers: bool,
    /// Variables every chat template rendering gets unless the request's own
    /// `chat_template_kwargs` sets them (vLLM's `--default-chat-template-kwargs`, as
    /// `{"enable_thinking": false}`).
    pub default_chat_template_kwargs: serde_json::Map<String, serde_json::Value>,
    /// Log-probabilities name tokens `token_id:{id}` unless a request says otherwise (vLLM's
    /// `--return-tokens-as-token-ids`).
    pub return_tokens_as_token_ids: bool,
    /// Every stream ends with a usage chunk, whether the request asks for one or not
    /// (vLLM's `--enable-force-include-usage`).
    pub force_include_usage: bool,
    /// What the log says of each request and its output (vLLM's `--enable-log-requests`,
    /// `--enable-log-outputs`, `--max-log-len`).
    pub request_log: request_log::RequestLog,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8000,
            api_key: None,
            served_model_name: "kiln".into(),
            model_aliases: Vec::new(),
            max_waiting: 1024,
            max_body_bytes: 8 << 20,
            demo: None,
            shutdown_timeout: Duration::from_secs(30),
            kv_events: None,
            logprobs_mode: kiln_engine::LogprobsMode::Raw,
            kv_transfer: None,
            reasoning: None,
            responses_store: 1024,
            responses_dir: None,
            priority_scheduling: false,
            kv_disk: None,
            sleep_mode: false,
            runtime_lora_updating: false,
            sleep_after_idle: None,
            request_id_headers: false,
            allowed_origins: Vec::new(),
            default_chat_template_kwargs: Default::default(),
            return_tokens_as_token_ids: false,
            force_include_usage: false,
            request_log: Default::default(),
        }
    }
}

/// A started server.
pub struct Server {
    pub addr: SocketAddr,
    pub engine: EngineInfo,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    shutdown: ShutdownHandle,
    /// Notified when a drain ran past its bound and open connections must be cut.
    forced: Arc<tokio::sync::Notify>,
}

/// Starts a graceful shutdown of a [`Server`] from anywhere (a signal handler, a test).
#[derive(Clone)]
pub struct ShutdownHandle {
    drain: Arc<tokio::sync::Notify>,
}

impl ShutdownHandle {
    /// Begins draining: 503 for new requests and `/health` at once, running sequences finish
    /// (up to the server's `shutdown_timeout`), then the server stops.
    pub fn shutdown(&self) {
        self.drain.notify_one();
    }
}

impl Server {
    /// Serves until a shutdown completes (`Ok`) or the listener fails.
    pub async fn wait(self) -> anyhow::Result<()> {
        let mut task = self.task;
        tokio::select! {
            r = &mut task => Ok(r??),
            () = self.forced.notified() => {
                task.abort();
                tracing::warn!("connections still open after the shutdown timeout: closed");
                Ok(())
            }
        }
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }
}

/// Builds the engine (on its own thread, with `factory`), binds, and starts serving.
pub async fn start(
    config: ServerConfig,
    model: Frontend,
    factory: EngineFactory,
) -> anyhow::Result<Server> {
    let kv_tx = match &config.kv_events {
        Some(c) => Some(kv_events::start(c.clone()).await?),
        None => None,
    };
    let kv_disk = config.kv_disk.clone();
    let engine =
        tokio::task::spawn_blocking(move || EngineHandle::spawn(factory, kv_tx, kv_disk)).await??;
    serve_engine(config, Arc::new(model), Arc::new(engine)).await
}

/// Binds and serves an engine that is already running (the desktop app's): the API's requests
/// and the app's share its batches. Draining for shutdown refuses new API requests only.
pub async fn start_on(
    config: ServerConfig,
    model: Arc<Frontend>,
    engine: Arc<EngineHandle>,
) -> anyhow::Result<Server> {
    anyhow::ensure!(
        config.kv_events.is_none(),
        "KV-cache events are published by an engine the server starts itself"
    );
    anyhow::ensure!(
        config.kv_disk.is_none(),
        "the KV disk tier belongs to an engine the server starts itself"
    );
    serve_engine(config, model, engine).await
}

async fn serve_engine(
    config: ServerConfig,
    model: Arc<Frontend>,
    engine: Arc<EngineHandle>,
) -> anyhow::Result<Server> {
    engine.health.end_drain();
    let info = engine.info.clone();
    tracing::info!("adapter: {}", info.adapter);
    tracing::info!(
        "KV pool: {} GPU blocks of {} tokens ({} tokens), {} CPU-tier blocks; max_model_len {}, max_num_seqs {}, max_num_batched_tokens {}",
        info.num_gpu_blocks,
        kiln_core::BLOCK_SIZE,
        info.num_gpu_blocks * kiln_core::BLOCK_SIZE,
        info.num_cpu_blocks,
        info.max_len,
        info.max_num_seqs,
        info.max_num_batched_tokens
    );
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    match info.gpu_bytes {
        (used, Some(m)) => tracing::info!(
            "device memory: the engine takes {:.0} MiB of {:.0} MiB{}",
            mib(used),
            mib(m.total),
            m.free
                .map(|f| format!(" ({:.0} MiB still free)", mib(f)))
                .unwrap_or_default()
        ),
        (used, None) => tracing::info!("device memory: the engine takes {:.0} MiB", mib(used)),
    }
    let listener = tokio::net::TcpListener::bind((config.host.as_str(), config.port)).await?;
    let addr = listener.local_addr()?;
    if let Some(t) = &config.kv_transfer {
        engine.set_pin_ttl(t.ttl);
        tracing::info!(
            "prefill/decode split: {:?} (blocks pinned for {:?})",
            t.role,
            t.ttl
        );
    }
    if let Some(idle) = config.sleep_after_idle {
        engine.sleep_after_idle(Some(idle));
        tracing::info!("the engine sleeps after {idle:?} without requests");
    }
    let timeout = config.shutdown_timeout;
    let responses =
        responses::ResponseStore::new(config.responses_store, config.responses_dir.clone())?;
    let health = engine.health.clone();
    let flusher = engine.clone();
    let reasoning = config
        .reasoning
        .unwrap_or_else(|| ReasoningFormat::detect(model.chat_template.as_ref()));
    tracing::info!(
        "chat: tool calls in {}, reasoning parser {reasoning:?}",
        model.tool_format.describe()
    );
    let state = Arc::new(AppState {
        config,
        reasoning,
        model,
        engine,
        metrics: Default::default(),
        created: routes::now_s(),
        constraints: Default::default(),
        kv_engine_id: format!("kiln-{:016x}", rand::random::<u64>()),
        port: addr.port(),
        responses,
    });
    let app = router::router(state)?;
    tracing::info!("serving on http://{addr}");
    let (drain, stop, forced) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let (d, st, f) = (drain.clone(), stop.clone(), forced.clone());
    tokio::spawn(async move {
        d.notified().await;
        health.begin_drain();
        let deadline = Instant::now() + timeout;
        tracing::info!(
            "draining: {} sequences running, waiting up to {timeout:?}",
            health.num_in_flight()
        );
        while health.num_in_flight() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if health.num_in_flight() > 0 {
            tracing::warn!(
                "shutdown timeout: {} sequences still running are cut",
                health.num_in_flight()
            );
        }
        if flusher.disk_stats().is_some() {
            let ok = flusher.flush_disk(timeout).await;
            let written = flusher.disk_stats().map_or(0, |d| d.blocks_written);
            match ok {
                true => tracing::info!("KV disk tier flushed ({written} blocks written)"),
                false => tracing::warn!("KV disk tier not flushed within {timeout:?}"),
            }
        }
        st.notify_one();
        // Responses still being written get a moment; then the connections are cut.
        tokio::time::sleep(Duration::from_secs(2)).await;
        f.notify_one();
    });
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.notified().await })
            .await
    });
    Ok(Server {
        addr,
        engine: info,
        task,
        shutdown: ShutdownHandle { drain },
        forced,
    })
}

/// [`start`], then serve until SIGTERM or SIGINT, drain, and return `Ok`.
pub async fn serve(
    config: ServerConfig,
    model: Frontend,
    factory: EngineFactory,
) -> anyhow::Result<()> {
    let server = start(config, model, factory).await?;
    let handle = server.shutdown_handle();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutdown signal: draining");
        handle.shutdown();
    });
    server.wait().await
}

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// An [`EngineFactory`] that opens the GPU and builds the engine for `config`/`weights`.
pub fn gpu_engine_factory(
    config: kiln_model::ModelConfig,
    weights: kiln_model::Weights,
    engine_config: kiln_engine::EngineConfig,
) -> EngineFactory {
    Box::new(move || {
        let ctx = pollster::block_on(kiln_gpu::GpuContext::new())?;
        Ok(kiln_engine::Engine::new(
            &ctx,
            &config,
            &weights,
            engine_config.clone(),
            &mut |_, _| {},
        )?)
    })
}
