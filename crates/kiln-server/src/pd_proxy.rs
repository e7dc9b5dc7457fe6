//! `kiln pd-proxy`: runs both legs of a prefill/decode split without llm-d's routing sidecar.
//! A completion or chat completion goes first to the prefill server, marked
//! `kv_transfer_params.do_remote_decode`, with one output token and no streaming; the
//! original body then goes to the decode server with the `kv_transfer_params` the prefill
//! answered, and the decode server's response (streamed or not) is passed back as it comes.
//! When the prefill leg fails, the decode server prefills the whole prompt itself. Every
//! other route (`/metrics`, `/v1/models`, the render endpoints, ...) is the decode server's;
//! `/health` is 200 only when both servers answer 200.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::TryStreamExt;
use serde_json::{Value, json};

use crate::error::ApiError;

#[derive(Clone, Debug)]
pub struct PdProxyConfig {
    /// Base URL of the prefill server (`kiln serve --kv-role producer`).
    pub prefill: String,
    /// Base URL of the decode server (`kiln serve --kv-role consumer`).
    pub decode: String,
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
}

/// The largest generation body the proxy reads (the servers behind it set their own limit).
const MAX_BODY: usize = 64 << 20;

struct Proxy {
    cfg: PdProxyConfig,
    client: reqwest::Client,
}

/// Binds and starts serving; returns the address and the serving task.
pub async fn start(
    cfg: PdProxyConfig,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind((cfg.host.as_str(), cfg.port)).await?;
    let addr = listener.local_addr()?;
    tracing::info!(
        "pd-proxy on http://{addr}: prefill {}, decode {}",
        cfg.prefill,
        cfg.decode
    );
    let proxy = Arc::new(Proxy {
        cfg,
        client: reqwest::Client::new(),
    });
    let app = Router::new()
        .route("/v1/completions", post(generate))
        .route("/v1/chat/completions", post(generate))
        .route("/health", get(health))
        .fallback(forward)
        .with_state(proxy);
    Ok((
        addr,
        tokio::spawn(async move { axum::serve(listener, app).await }),
    ))
}

fn url(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// The prefill leg, then the decode leg with what the prefill answered.
async fn generate(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return ApiError::bad_request(format!(
            "the request body could not be read (at most {MAX_BODY} bytes)"
        ))
        .into_response();
    };
    let auth = parts.headers.get(header::AUTHORIZATION).cloned();
    let mut decode_body = body.clone();
    if let Ok(mut v @ Value::Object(_)) = serde_json::from_slice::<Value>(&body) {
        match prefill(&p, &path, &v, auth.as_ref()).await {
            Ok(params) => {
                v["kv_transfer_params"] = params;
                decode_body = Bytes::from(serde_json::to_vec(&v).expect("JSON serializes"));
            }
            Err(e) => tracing::warn!("prefill leg failed, the decode server prefills: {e}"),
        }
    }
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
    if let Some(a) = auth {
        headers.insert(header::AUTHORIZATION, a);
    }
    let r = p
        .client
        .post(url(&p.cfg.decode, &path))
        .headers(headers)
        .body(decode_body);
    relay(r).await
}

/// Sends the prefill leg; returns the `kv_transfer_params` to give the decode leg.
async fn prefill(
    p: &Proxy,
    path: &str,
    body: &Value,
    auth: Option<&header::HeaderValue>,
) -> Result<Value, String> {
    let mut pre = body.clone();
    let o = pre.as_object_mut().expect("an object");
    for k in ["stream_options", "max_completion_tokens"] {
        o.remove(k);
    }
    o.insert("stream".into(), json!(false));
    o.insert("max_tokens".into(), json!(1));
    o.insert(
        "kv_transfer_params".into(),
        json!({"do_remote_decode": true}),
    );
    let mut r = p.client.post(url(&p.cfg.prefill, path)).json(&pre);
    if let Some(a) = auth {
        r = r.header(header::AUTHORIZATION, a);
    }
    let resp = r.send().await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {}", v["error"]["message"]));
    }
    match v.get("kv_transfer_params") {
        Some(params @ Value::Object(_)) => Ok(params.clone()),
        _ => Err("the prefill server pinned no blocks (a prompt under one block?)".into()),
    }
}

/// Passes a request to the decode server unchanged.
async fn forward(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_string();
    let mut headers = parts.headers;
    headers.remove(header::HOST);
    let r = p
        .client
        .request(parts.method, url(&p.cfg.decode, &path))
        .headers(headers)
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    relay(r).await
}

/// Sends `r` and streams its response back.
async fn relay(r: reqwest::RequestBuilder) -> Response {
    match r.send().await {
        Ok(resp) => {
            let mut out = Response::builder().status(resp.status());
            for k in [
                header::CONTENT_TYPE,
                header::RETRY_AFTER,
                header::CACHE_CONTROL,
            ] {
                if let Some(v) = resp.headers().get(&k) {
                    out = out.header(k, v);
                }
            }
            let body = Body::from_stream(resp.bytes_stream().map_err(std::io::Error::other));
            out.body(body).unwrap_or_else(|e| {
                ApiError::internal(format!("relaying the response: {e}")).into_response()
            })
        }
        Err(e) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            format!("the decode server did not answer: {e}"),
        )
        .into_response(),
    }
}

async fn health(State(p): State<Arc<Proxy>>) -> Response {
    for base in [&p.cfg.prefill, &p.cfg.decode] {
        let ok = p
            .client
            .get(url(base, "/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if !ok {
            return ApiError::unavailable(format!("{base} is not healthy")).into_response();
        }
    }
    (StatusCode::OK, "ok").into_response()
}
