//! `GET /v1/models`, `GET /health`, `GET /version`, `GET /metrics`, `POST /tokenize`, `POST /detokenize`,
//! `POST /reset_prefix_cache`.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use kiln_model::LoraAdapter;

use crate::api::{DetokenizeRequest, TokenizeRequest};
use crate::error::{ApiError, ApiJson};
use crate::state::Shared;

/// The served model's card (`adapter` `None`), or a LoRA adapter's: as vLLM lists them, with
/// the folder as `root` and the served model as `parent`.
fn model_card(st: &Shared, adapter: Option<&LoraAdapter>) -> Value {
    let name = &st.config.served_model_name;
    let mut card = json!({
        "id": name, "object": "model", "created": st.created,
        "owned_by": "kiln", "max_model_len": st.engine.info.max_len,
        "root": name, "parent": null,
    });
    if let Some(a) = adapter {
        card["id"] = json!(a.name);
        card["root"] = json!(a.path.display().to_string());
        card["parent"] = json!(name);
    }
    card
}

pub async fn models(State(st): State<Shared>) -> Response {
    let adapters = st.engine.lora.loaded();
    let mut cards: Vec<Value> = std::iter::once(None)
        .chain(adapters.iter().map(|(_, a)| Some(&**a)))
        .map(|a| model_card(&st, a))
        .collect();
    // The served model's other names, each a card of its own (as vLLM lists them).
    for (i, alias) in st.config.model_aliases.iter().enumerate() {
        let mut card = model_card(&st, None);
        card["id"] = json!(alias);
        cards.insert(1 + i, card);
    }
    axum::Json(json!({"object": "list", "data": cards})).into_response()
}

pub async fn model(State(st): State<Shared>, Path(id): Path<String>) -> Result<Response, ApiError> {
    st.check_model(Some(&id))?;
    let adapter = st.engine.lora.find(&id).map(|(_, a)| a);
    let mut card = model_card(&st, adapter.as_deref());
    if adapter.is_none() {
        card["id"] = json!(id);
    }
    Ok(axum::Json(card).into_response())
}

/// `{"version"}`: kiln's, as vLLM's `/version` answers its own.
pub async fn version() -> Response {
    axum::Json(json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}

/// 200 while the server takes requests; 503 with the reason while the engine is down or the
/// server drains for shutdown (a readiness probe).
pub async fn health(State(st): State<Shared>) -> Result<&'static str, ApiError> {
    st.engine.health.check().map_err(ApiError::unavailable)?;
    Ok("")
}

pub async fn metrics(State(st): State<Shared>) -> Response {
    let text = st.metrics.render(
        &st.engine.stats(),
        st.engine.disk_stats(),
        &st.engine.info,
        &st.engine.health,
        &st.engine.lora.requests(),
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub async fn tokenize(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<TokenizeRequest>,
) -> Result<Response, ApiError> {
    st.check_model(req.model.as_deref())?;
    let (text, default_special) = match (req.prompt, req.messages) {
        (Some(p), None) => (p, true),
        (None, Some(m)) => (st.render_chat(&m)?, false),
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `prompt` and `messages`",
            ));
        }
    };
    let tokens = st
        .model
        .tokenizer
        .encode(&text, req.add_special_tokens.unwrap_or(default_special))
        .map_err(|e| ApiError::bad_param("prompt", e.to_string()))?;
    Ok(axum::Json(
        json!({"tokens": tokens, "count": tokens.len(), "max_model_len": st.engine.info.max_len}),
    )
    .into_response())
}

pub async fn detokenize(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<DetokenizeRequest>,
) -> Result<Response, ApiError> {
    st.check_model(req.model.as_deref())?;
    if let Some(&bad) = req
        .tokens
        .iter()
        .find(|&&t| t as usize >= st.model.vocab_size)
    {
        return Err(ApiError::bad_param(
            "tokens",
            format!("token id {bad} is out of the vocabulary"),
        ));
    }
    let text = st
        .model
        .tokenizer
        .decode(&req.tokens, false)
        .map_err(|e| ApiError::bad_param("tokens", e.to_string()))?;
    Ok(axum::Json(json!({"prompt": text})).into_response())
}

/// Empties the prefix cache of every block no request holds, on the GPU, in the CPU tier and
/// in the disk tier's folder (vLLM's route); answers what was dropped.
pub async fn reset_prefix_cache(State(st): State<Shared>) -> Result<Response, ApiError> {
    let reset = st.engine.reset_prefix_cache().await;
    let reset =
        reset.map_err(|e| ApiError::internal(format!("resetting the prefix cache: {e}")))?;
    tracing::info!(
        "prefix cache reset: {} GPU, {} CPU and {} disk blocks dropped",
        reset.gpu_blocks,
        reset.cpu_blocks,
        reset.disk_blocks
    );
    Ok(axum::Json(reset).into_response())
}
