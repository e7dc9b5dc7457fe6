//! The HTTP surface: every route, the API key check, the body limit and one log line per
//! request (with its `X-Request-Id`, sent back, where asked).

use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::cors::CorsLayer;

use crate::error::{ApiError, BodyLimit};
use crate::state::Shared;
use crate::{demo, kv_transfer, messages, responses, routes};

pub fn router(state: Shared) -> anyhow::Result<Router> {
    use routes::{chat, completions, embeddings, misc, render};
    let limit = state.config.max_body_bytes;
    let ids = state.config.request_id_headers;
    let cors = cors_layer(&state.config.allowed_origins)?;
    let protected = Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/completions", post(completions::completions))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/v1/chat/completions/render", post(render::render_chat))
        .route("/v1/completions/render", post(render::render_completions))
        .route("/v1/messages", post(messages::create))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/responses", post(responses::create))
        .route(
            "/v1/responses/{id}",
            get(responses::get).delete(responses::delete),
        )
        .route("/v1/responses/{id}/cancel", post(responses::cancel))
        .route(
            "/v1/responses/{id}/input_items",
            get(responses::input_items),
        )
        .route("/v1/models", get(misc::models))
        .route("/v1/models/{id}", get(misc::model))
        .route("/tokenize", post(misc::tokenize))
        .route("/detokenize", post(misc::detokenize))
        .route("/reset_prefix_cache", post(misc::reset_prefix_cache))
        .route(
            "/v1/kv_transfer/{request_id}",
            get(kv_transfer::export_blocks),
        );
    // vLLM's sleep mode, where the server was started with it.
    let protected = match state.config.sleep_mode {
        true => protected
            .route("/sleep", post(routes::sleep::sleep))
            .route("/wake_up", post(routes::sleep::wake_up))
            .route("/is_sleeping", get(routes::sleep::is_sleeping)),
        false => protected,
    };
    // Loading adapters from paths the request names, only where the server allows it.
    let protected = match state.config.runtime_lora_updating && state.engine.info.lora_loadable {
        true => protected
            .route("/v1/load_lora_adapter", post(routes::lora::load))
            .route("/v1/unload_lora_adapter", post(routes::lora::unload)),
        false => protected,
    }
    .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    let mut app = Router::new().merge(protected);
    if let Some(demo) = &state.config.demo {
        app = demo::mount(app, demo);
    }
    Ok(app
        .route("/health", get(misc::health))
        .route("/version", get(misc::version))
        .route("/metrics", get(misc::metrics))
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                "method not allowed",
            )
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(move |mut req: Request, next: Next| {
            req.extensions_mut().insert(BodyLimit(limit));
            log_request(req, next, ids)
        }))
        .layer(tower::util::option_layer(cors))
        .with_state(state))
}

/// Browser pages of `origins` (`*`: any) may call every route, preflight requests answered
/// before the API key is asked for; none: no CORS headers, so browsers keep other origins out.
fn cors_layer(origins: &[String]) -> anyhow::Result<Option<CorsLayer>> {
    use tower_http::cors::{AllowOrigin, Any};
    if origins.is_empty() {
        return Ok(None);
    }
    let allow = match origins.iter().any(|o| o == "*") {
        true => AllowOrigin::any(),
        false => AllowOrigin::list(
            (origins.iter())
                .map(|o| header::HeaderValue::from_str(o))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!("allowed origins {origins:?}: {e}"))?,
        ),
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods(Any)
            .allow_headers(Any)
            .expose_headers(Any),
    ))
}

/// One log line per request, naming its `X-Request-Id` (the client's, or one made here)
/// where `ids` (`--enable-request-id-headers`), and the id sent back in that header.
async fn log_request(req: Request, next: Next, ids: bool) -> Response {
    let (method, path, start) = (
        req.method().clone(),
        req.uri().path().to_string(),
        Instant::now(),
    );
    let id = ids.then(|| {
        (req.headers().get(REQUEST_ID).cloned()).unwrap_or_else(|| {
            let made = format!("{:032x}", rand::random::<u128>());
            header::HeaderValue::from_str(&made).expect("hex digits")
        })
    });
    let mut res = next.run(req).await;
    let shown = (id.as_ref()).map_or(String::new(), |v| {
        format!(" [{}]", v.to_str().unwrap_or("(not text)"))
    });
    tracing::info!(
        "{method} {path} {} {:.1} ms{shown}",
        res.status().as_u16(),
        start.elapsed().as_secs_f64() * 1e3
    );
    if let Some(v) = id {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    res
}

/// The header a request's id travels in (gateways set it; vLLM echoes it).
const REQUEST_ID: header::HeaderName = header::HeaderName::from_static("x-request-id");

async fn auth(State(st): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.config.api_key {
        // A bearer token, or Anthropic clients' `x-api-key`.
        let headers = req.headers();
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
        if given != Some(key.as_str()) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}
