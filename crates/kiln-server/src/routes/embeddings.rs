//! `POST /v1/embeddings`: each input's embedding as kiln-frontend's `embedding.rs` computes it
//! (the final hidden state at the input's last token, scaled to unit length), as the prefill
//! of a one-token request batched with everything else.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use kiln_frontend::{GenSpec, unit_length};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{PromptInput, reject_unknown};
use crate::error::{ApiError, ApiJson};
use crate::state::Shared;

#[derive(Deserialize, Debug)]
pub struct EmbeddingRequest {
    pub model: Option<String>,
    pub input: PromptInput,
    /// `float` (default) or `base64` (little-endian f32s, what OpenAI's clients ask for).
    pub encoding_format: Option<String>,
    /// Accepted only as the model's own width (no model kiln runs is trained to be cut).
    pub dimensions: Option<u64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

pub async fn embeddings(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<EmbeddingRequest>,
) -> Result<Response, ApiError> {
    reject_unknown(&req.extra)?;
    let lora = st.check_model(req.model.as_deref())?;
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_param(
                "encoding_format",
                format!("encoding_format `{other}` is not one of float, base64"),
            ));
        }
    };
    let width = st.engine.info.hidden_size;
    if let Some(d) = req.dimensions.filter(|&d| d != width as u64) {
        return Err(ApiError::bad_param(
            "dimensions",
            format!("this model's embeddings have {width} dimensions, not {d}"),
        ));
    }
    let inputs = super::render::prompt_ids(&st, &req.input, "input")?;
    let spec = GenSpec {
        lora,
        ..st.model.embedding_spec()
    };
    let mut seqs = Vec::with_capacity(inputs.len());
    for (i, ids) in inputs.iter().enumerate() {
        st.model
            .check_embedding_input(ids, st.engine.info.max_len, i)?;
        seqs.extend(st.submit(ids, 1, &spec, Vec::new(), false)?);
    }
    let results = futures_util::future::join_all(seqs.into_iter().map(|s| s.collect())).await;
    let mut data = Vec::with_capacity(results.len());
    for (index, r) in results.into_iter().enumerate() {
        let (_, d) = r?;
        let v = unit_length(
            d.hidden
                .ok_or_else(|| ApiError::internal("the engine returned no hidden state"))?,
        );
        let embedding = if base64 {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            json!(base64::engine::general_purpose::STANDARD.encode(bytes))
        } else {
            json!(v)
        };
        data.push(json!({"object": "embedding", "index": index, "embedding": embedding}));
    }
    let tokens: usize = inputs.iter().map(Vec::len).sum();
    tracing::info!(inputs = inputs.len(), tokens, "embeddings");
    Ok(axum::Json(json!({
        "object": "list",
        "data": data,
        "model": st.model_name(&spec),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response())
}
