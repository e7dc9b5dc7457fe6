//! vLLM's sleep mode routes (`--enable-sleep-mode`): `POST /sleep?level=1|2` gives the
//! engine's GPU memory back once no request runs or waits (409 while some do),
//! `POST /wake_up` builds it again (`?tags=weights` and `?tags=kv_cache` accepted: kiln wakes
//! both together), `GET /is_sleeping` says which. A request that arrives while the engine
//! sleeps wakes it and is served once it is built (`engine_loop/sleep.rs`).

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ApiError;
use crate::state::Shared;

/// The `name=value` pairs of a query string (values as given: the ones taken here need no
/// decoding, and any other is refused as written).
fn pairs(query: &Option<String>) -> Vec<(&str, &str)> {
    (query.as_deref().unwrap_or("").split('&'))
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect()
}

pub async fn sleep(State(st): State<Shared>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    for (name, value) in pairs(&q) {
        match (name, value) {
            // Level 1 keeps the weights in host memory, level 2 drops them: kiln reads them
            // again from the mapped model file either way.
            ("level", "1" | "2") => {}
            ("level", v) => {
                return Err(ApiError::bad_param("level", format!("level {v}: 1 or 2")));
            }
            (n, _) => {
                return Err(ApiError::bad_param(
                    n,
                    format!("`{n}` is not a field of /sleep"),
                ));
            }
        }
    }
    st.engine
        .sleep()
        .await
        .map_err(|e| ApiError::new(StatusCode::CONFLICT, "conflict_error", e))?;
    Ok(StatusCode::OK.into_response())
}

pub async fn wake_up(
    State(st): State<Shared>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    for (name, value) in pairs(&q) {
        match (name, value) {
            ("tags", "weights" | "kv_cache") => {}
            ("tags", v) => {
                return Err(ApiError::bad_param(
                    "tags",
                    format!("tag `{v}`: weights or kv_cache (kiln wakes both together)"),
                ));
            }
            (n, _) => {
                return Err(ApiError::bad_param(
                    n,
                    format!("`{n}` is not a field of /wake_up"),
                ));
            }
        }
    }
    st.engine.wake_up().await.map_err(ApiError::internal)?;
    Ok(StatusCode::OK.into_response())
}

pub async fn is_sleeping(State(st): State<Shared>) -> Response {
    Json(json!({"is_sleeping": st.engine.is_sleeping()})).into_response()
}
