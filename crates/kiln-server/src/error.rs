//! OpenAI-shaped errors (`{"error": {"message", "type", "param", "code"}}`) and the JSON body
//! extractor whose rejections use that shape (axum's own rejections are plain text).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after_s: None,
        }
    }

    /// 400 invalid_request_error.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 naming the offending parameter.
    pub fn bad_param(param: &str, message: impl Into<String>) -> Self {
        Self {
            param: Some(param.to_string()),
            ..Self::bad_request(message)
        }
    }

    pub fn model_not_found(model: &str) -> Self {
        Self {
            param: Some("model".into()),
            code: Some("model_not_found"),
            ..Self::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!("The model `{model}` does not exist."),
            )
        }
    }

    pub fn unauthorized() -> Self {
        Self {
            code: Some("invalid_api_key"),
            ..Self::new(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "Incorrect or missing API key.",
            )
        }
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("The request body is larger than the limit of {limit} bytes."),
        )
    }

    pub fn overloaded(retry_after_s: u64) -> Self {
        Self {
            code: Some("overloaded"),
            retry_after_s: Some(retry_after_s),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "The server is overloaded; retry later.",
            )
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// 503: the server cannot serve now (draining for shutdown, the engine restarting).
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self {
            code: Some("unavailable"),
            retry_after_s: Some(1),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", reason)
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), "{}", self.message);
        } else {
            tracing::debug!(status = self.status.as_u16(), "{}", self.message);
        }
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after_s {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

/// A JSON body whose rejections are OpenAI-shaped: 413 over the body limit, 400 otherwise.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = req.extensions().get::<BodyLimit>().map_or(0, |l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large(limit)
            } else {
                ApiError::bad_request(format!(
                    "could not read the request body: {}",
                    r.body_text()
                ))
            }
        })?;
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| {
            use serde_json::error::Category;
            match e.classify() {
                Category::Data => ApiError::bad_request(format!("invalid request: {e}")),
                _ => ApiError::bad_request(format!("the body is not valid JSON: {e}")),
            }
        })
    }
}

/// The body size limit, as a request extension (named in 413 messages).
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

impl From<kiln_frontend::ParamError> for ApiError {
    fn from(e: kiln_frontend::ParamError) -> Self {
        ApiError::bad_param(&e.param, e.message)
    }
}
