//! `GET /v1/kv_transfer/{request_id}` on a producer: the blocks pinned for a finished request,
//! in the export format (`wire.rs`); answering unpins them. 404 when none are pinned (never,
//! already fetched, or expired).

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::KvRole;
use super::wire::{self, BlockHeader, Header};
use crate::error::ApiError;
use crate::state::Shared;

pub async fn export_blocks(
    State(st): State<Shared>,
    Path(request_id): Path<String>,
) -> Result<Response, ApiError> {
    if st.config.kv_transfer.as_ref().map(|c| c.role) != Some(KvRole::Producer) {
        return Err(ApiError::not_found(
            "this server does not export KV blocks (kiln serve --kv-role producer does)",
        ));
    }
    let missing = || {
        ApiError::not_found(format!(
            "no KV blocks are pinned for request {request_id} (never, already fetched, or expired)"
        ))
    };
    let id: u64 = request_id.parse().map_err(|_| missing())?;
    let ex = st
        .engine
        .export(id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(missing)?;
    let layout = st.engine.info.kv_layout;
    let per_block = layout.bytes_per_block() as usize;
    let bs = kiln_core::BLOCK_SIZE;
    let blocks = ex
        .keys
        .iter()
        .enumerate()
        .map(|(i, &hash)| BlockHeader {
            hash,
            parent: i.checked_sub(1).map(|p| ex.keys[p]),
            tokens: ex.tokens[i * bs..(i + 1) * bs].to_vec(),
            checksum: wire::checksum(&ex.data[i * per_block..(i + 1) * per_block]),
        })
        .collect();
    let header = Header {
        model: st.config.served_model_name.clone(),
        engine_id: st.kv_engine_id.clone(),
        request_id,
        dtype: layout.dtype.name().into(),
        layers: layout.layers,
        kv_heads: layout.kv_heads,
        head_dim: layout.head_dim,
        block_size: bs,
        bytes_per_block: per_block,
        blocks,
    };
    tracing::info!(
        id,
        blocks = ex.keys.len(),
        bytes = ex.data.len(),
        "KV blocks exported"
    );
    st.metrics.kv_exported(ex.keys.len());
    Ok((
        [(header::CONTENT_TYPE, "application/octet-stream")],
        wire::encode(&header, &ex.data),
    )
        .into_response())
}
