//! Prefill on one server, decode on another (llm-d's P/D flow). A request with
//! `kv_transfer_params: {"do_remote_decode": true}` on a producer (`--kv-role producer`) is
//! prefilled and sampled as usual; its full blocks stay pinned (for `ttl`, or until fetched)
//! and the response's `kv_transfer_params` name this engine, the request, its blocks and the
//! host and port to fetch them from. A consumer (`--kv-role consumer`) given those params
//! (`do_remote_prefill: true`) fetches the blocks from the producer's export endpoint
//! (`wire.rs`), checks each against the prompt and its own hashes, stores the good ones in its
//! CPU tier and then admits the request, which finds them as cached blocks and prefills only
//! the tail. A transfer that fails costs time, not the request: it is prefilled whole.
//!
//! Files: `pins` (the engine thread's side: TTLs, export, import), `wire` (the export
//! format), `export` (the export endpoint), `fetch` (the consumer's fetch and checks).

mod export;
mod fetch;
pub mod pins;
pub mod wire;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use export::export_blocks;

use crate::engine_loop::{Command, EngineHandle};
use crate::error::ApiError;
use crate::state::Shared;
use pins::TransferCommand;

/// Which side of a prefill/decode pair a server is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvRole {
    /// Prefills requests marked `do_remote_decode` and serves their blocks.
    Producer,
    /// Fetches the blocks of requests marked `do_remote_prefill`.
    Consumer,
}

#[derive(Clone, Debug)]
pub struct KvTransferConfig {
    pub role: KvRole,
    /// The host decode servers reach this producer at (`remote_host` in its responses).
    pub host: String,
    /// How long a producer keeps a finished request's blocks for a decode server.
    pub ttl: Duration,
}

/// The request and response field `kv_transfer_params`, as llm-d and vLLM write it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct KvTransferParams {
    #[serde(default)]
    pub do_remote_decode: bool,
    #[serde(default)]
    pub do_remote_prefill: bool,
    pub remote_engine_id: Option<String>,
    pub remote_request_id: Option<String>,
    pub remote_block_ids: Option<Vec<u32>>,
    pub remote_host: Option<String>,
    pub remote_port: Option<u16>,
    /// Anything else: refused by name.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// What a request asks of the transfer.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: an ordinary request (or a consumer's request whose fetch failed).
    Local,
    /// Prefill here, pin the blocks, answer with the params to fetch them.
    Produce,
    /// The fetched blocks are stored in the CPU tier.
    Consumed,
}

impl Plan {
    pub fn pins(&self) -> bool {
        *self == Plan::Produce
    }
}

/// Checks a body's `kv_transfer_params` against this server's role and the request's shape
/// (`choices` sequences, streamed or not), and for a consumer fetches the blocks and stores
/// them under the request's `salt`, before the request is submitted.
pub async fn plan(
    st: &Shared,
    params: Option<&KvTransferParams>,
    prompt: &[u32],
    salt: Option<&str>,
    (choices, stream): (usize, bool),
) -> Result<Plan, ApiError> {
    let Some(p) = params else {
        return Ok(Plan::Local);
    };
    let bad = |why: &str| Err(ApiError::bad_param("kv_transfer_params", why));
    if let Some(k) = p.extra.keys().next() {
        return bad(&format!(
            "`kv_transfer_params.{k}` is not supported by this server"
        ));
    }
    let role = st.config.kv_transfer.as_ref().map(|c| c.role);
    match (p.do_remote_decode, p.do_remote_prefill) {
        (false, false) => Ok(Plan::Local),
        (true, true) => bad("do_remote_decode and do_remote_prefill exclude each other"),
        (true, false) => {
            if role != Some(KvRole::Producer) {
                return bad(
                    "do_remote_decode needs a prefill server (kiln serve --kv-role producer)",
                );
            }
            if choices != 1 || stream {
                return bad(
                    "do_remote_decode takes one prompt, n = 1 and a response that is not streamed",
                );
            }
            Ok(Plan::Produce)
        }
        (false, true) => {
            if role != Some(KvRole::Consumer) {
                return bad(
                    "do_remote_prefill needs a decode server (kiln serve --kv-role consumer)",
                );
            }
            let (Some(host), Some(port), Some(req)) =
                (&p.remote_host, p.remote_port, &p.remote_request_id)
            else {
                return bad(
                    "do_remote_prefill needs remote_host, remote_port and remote_request_id",
                );
            };
            let from = format!("{host}:{port}");
            let consumed = async {
                let f = fetch::fetch(st, host, port, req, p.remote_engine_id.as_deref(), prompt)
                    .await?;
                if f.keys.is_empty() {
                    return Err("no block passed the checks".to_string());
                }
                let salt = salt.map(String::from);
                st.engine.import(f.keys, f.tokens, salt, f.data).await
            };
            match consumed.await {
                Ok(n) => {
                    st.metrics.kv_transfer(true);
                    tracing::info!(blocks = n, "KV blocks from {from} stored in the CPU tier");
                    Ok(Plan::Consumed)
                }
                Err(e) => {
                    st.metrics.kv_transfer(false);
                    tracing::warn!("KV transfer from {from} failed, prefilling instead: {e}");
                    Ok(Plan::Local)
                }
            }
        }
    }
}

/// The `kv_transfer_params` a producer answers for its finished request `id` (`null` when
/// nothing was pinned: a prompt shorter than one block).
pub async fn produced(st: &Shared, id: u64) -> Value {
    let (Some(cfg), Some(blocks)) = (&st.config.kv_transfer, st.engine.pinned(id).await) else {
        return Value::Null;
    };
    json!({
        "do_remote_decode": false,
        "do_remote_prefill": true,
        "remote_engine_id": st.kv_engine_id,
        "remote_request_id": id.to_string(),
        "remote_block_ids": blocks,
        "remote_host": cfg.host,
        "remote_port": st.port,
    })
}

impl EngineHandle {
    fn transfer<T>(
        &self,
        cmd: impl FnOnce(flume::Sender<T>) -> TransferCommand,
    ) -> flume::Receiver<T> {
        let (tx, rx) = flume::bounded(1);
        let _ = self.commands.send(Command::Transfer(cmd(tx)));
        rx
    }

    /// Sets how long finished requests' blocks stay pinned.
    pub fn set_pin_ttl(&self, ttl: Duration) {
        let _ = self
            .commands
            .send(Command::Transfer(TransferCommand::SetTtl(ttl)));
    }

    async fn pinned(&self, id: u64) -> Option<Vec<u32>> {
        let rx = self.transfer(|reply| TransferCommand::Pinned { id, reply });
        rx.recv_async().await.ok().flatten()
    }

    async fn export(&self, id: u64) -> Result<Option<kiln_engine::ExportedBlocks>, String> {
        let rx = self.transfer(|reply| TransferCommand::Export { id, reply });
        rx.recv_async()
            .await
            .map_err(|_| "the engine stopped".to_string())?
    }

    async fn import(
        &self,
        keys: Vec<u64>,
        tokens: Vec<u32>,
        salt: Option<String>,
        data: Vec<u8>,
    ) -> Result<usize, String> {
        let rx = self.transfer(|reply| TransferCommand::Import {
            keys,
            tokens,
            salt,
            data,
            reply,
        });
        rx.recv_async()
            .await
            .map_err(|_| "the engine stopped".to_string())?
    }
}
