//! The consumer's side of a transfer: fetch a producer's export and keep the blocks that are
//! this prompt's prefix, whole and chained. (Each kept block's hash is checked once more
//! against this server's own, by the scheduler, when it is stored.)

use std::time::Duration;

use kiln_core::BLOCK_SIZE;

use super::wire;
use crate::state::Shared;

/// The blocks to store: their hashes, tokens and bytes.
pub struct Fetched {
    pub keys: Vec<u64>,
    pub tokens: Vec<u32>,
    pub data: Vec<u8>,
}

pub async fn fetch(
    st: &Shared,
    host: &str,
    port: u16,
    request_id: &str,
    engine_id: Option<&str>,
    prompt: &[u32],
) -> Result<Fetched, String> {
    let url = format!("http://{host}:{port}/v1/kv_transfer/{request_id}");
    let mut req = reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(120));
    if let Some(key) = &st.config.api_key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "{url} answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    let (h, data) = wire::decode(&body)?;
    let layout = st.engine.info.kv_layout;
    let per_block = layout.bytes_per_block() as usize;
    let ours = (
        st.config.served_model_name.as_str(),
        layout.dtype.name(),
        layout.layers,
        layout.kv_heads,
        layout.head_dim,
        BLOCK_SIZE,
        per_block,
    );
    let theirs = (
        h.model.as_str(),
        h.dtype.as_str(),
        h.layers,
        h.kv_heads,
        h.head_dim,
        h.block_size,
        h.bytes_per_block,
    );
    if ours != theirs {
        return Err(format!(
            "the producer's KV cache (model, dtype, layers, KV heads, head size, block size, bytes per block) is {theirs:?}, this server's {ours:?}"
        ));
    }
    if h.request_id != request_id || engine_id.is_some_and(|e| e != h.engine_id) {
        return Err(format!(
            "asked for request {request_id} of engine {engine_id:?}, got request {} of engine {}",
            h.request_id, h.engine_id
        ));
    }
    let mut n = 0;
    let mut parent = None;
    for (i, b) in h.blocks.iter().enumerate() {
        let why = if prompt.get(i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE) != Some(&b.tokens[..]) {
            "holds other tokens than the prompt"
        } else if b.parent != parent {
            "does not follow the block before it"
        } else if wire::checksum(&data[i * per_block..(i + 1) * per_block]) != b.checksum {
            "was damaged or altered (checksum)"
        } else {
            parent = Some(b.hash);
            n += 1;
            continue;
        };
        tracing::warn!(
            "KV block {i} of {} from {url} {why}: it and the blocks after it are prefilled here",
            h.blocks.len()
        );
        break;
    }
    Ok(Fetched {
        keys: h.blocks[..n].iter().map(|b| b.hash).collect(),
        tokens: prompt[..n * BLOCK_SIZE].to_vec(),
        data: data[..n * per_block].to_vec(),
    })
}
