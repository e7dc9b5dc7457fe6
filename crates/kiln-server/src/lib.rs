//! kiln's OpenAI-compatible server. Three layers, as in vLLM:
//! - HTTP handlers on tokio (`routes`): parse and validate, tokenize, then for each sequence
//!   detokenize and match stop strings as tokens arrive (`generate`, `stop`, `sse`);
//! - one engine thread (`engine_loop`) that owns the [`kiln_engine::Engine`] and steps it,
//!   fed by a channel of add/abort commands, answering on per-request channels;
//! - the engine itself (scheduler + GPU runner).
//!
//! Files: `api` (request types), `error` (OpenAI errors, JSON extractor), `state` (shared
//! state, validation), `metrics` (Prometheus text).

mod api;
mod demo;
mod engine_loop;
mod error;
mod generate;
mod metrics;
mod routes;
mod sse;
mod state;
mod structured;
mod tools;
pub mod stop;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use demo::DemoFiles;
pub use engine_loop::{EngineFactory, EngineInfo};
pub use error::ApiError;
pub use state::ModelInfo;

use engine_loop::EngineHandle;
use error::BodyLimit;
use state::{AppState, Shared};

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
    /// When set, `/v1/*`, `/tokenize` and `/detokenize` need `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    pub served_model_name: String,
    /// Requests queued (waiting in the scheduler or not yet admitted) beyond which new ones
    /// get 503 with Retry-After.
    pub max_waiting: usize,
    pub max_body_bytes: usize,
    /// The browser demo, served under `/demo/` when set.
    pub demo: Option<DemoFiles>,
    /// What reported log-probabilities describe (raw model logits by default, as vLLM).
    pub logprobs_mode: kiln_engine::LogprobsMode,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8000,
            api_key: None,
            served_model_name: "kiln".into(),
            max_waiting: 1024,
            max_body_bytes: 8 << 20,
            demo: None,
            logprobs_mode: kiln_engine::LogprobsMode::Raw,
        }
    }
}

/// A started server.
pub struct Server {
    pub addr: SocketAddr,
    pub engine: EngineInfo,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Serves until the listener fails.
    pub async fn wait(self) -> anyhow::Result<()> {
        Ok(self.task.await??)
    }
}

/// Builds the engine (on its own thread, with `factory`), binds, and starts serving.
pub async fn start(config: ServerConfig, model: ModelInfo, factory: EngineFactory) -> anyhow::Result<Server> {
    let engine = tokio::task::spawn_blocking(move || EngineHandle::spawn(factory)).await??;
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
    let listener = tokio::net::TcpListener::bind((config.host.as_str(), config.port)).await?;
    let addr = listener.local_addr()?;
    let state = Arc::new(AppState { config, model, engine, metrics: Default::default(), created: routes::now_s(), constraints: Default::default() });
    let app = router(state);
    tracing::info!("serving on http://{addr}");
    let task = tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(Server { addr, engine: info, task })
}

/// [`start`], then serve forever.
pub async fn serve(config: ServerConfig, model: ModelInfo, factory: EngineFactory) -> anyhow::Result<()> {
    start(config, model, factory).await?.wait().await
}

fn router(state: Shared) -> Router {
    use routes::{chat, completions, misc};
    let limit = state.config.max_body_bytes;
    let protected = Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/completions", post(completions::completions))
        .route("/v1/models", get(misc::models))
        .route("/v1/models/{id}", get(misc::model))
        .route("/tokenize", post(misc::tokenize))
        .route("/detokenize", post(misc::detokenize))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    let mut app = Router::new().merge(protected);
    if let Some(demo) = &state.config.demo {
        app = demo::mount(app, demo);
    }
    app
        .route("/health", get(misc::health))
        .route("/metrics", get(misc::metrics))
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(axum::http::StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", "method not allowed")
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(move |mut req: Request, next: Next| {
            req.extensions_mut().insert(BodyLimit(limit));
            log_request(req, next)
        }))
        .with_state(state)
}

/// One log line per request.
async fn log_request(req: Request, next: Next) -> Response {
    let (method, path, start) = (req.method().clone(), req.uri().path().to_string(), Instant::now());
    let res = next.run(req).await;
    tracing::info!("{method} {path} {} {:.1} ms", res.status().as_u16(), start.elapsed().as_secs_f64() * 1e3);
    res
}

async fn auth(State(st): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.config.api_key {
        let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(key.as_str()) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}

/// An [`EngineFactory`] that opens the GPU and builds the engine for `config`/`weights`.
pub fn gpu_engine_factory(
    config: kiln_model::ModelConfig,
    weights: kiln_model::Weights,
    engine_config: kiln_engine::EngineConfig,
) -> EngineFactory {
    Box::new(move || {
        let ctx = pollster::block_on(kiln_gpu::GpuContext::new())?;
        Ok(kiln_engine::Engine::new(&ctx, &config, &weights, engine_config, &mut |_, _| {})?)
    })
}
