//! The engine thread's side of the prefill/decode split: the time-to-live of pinned blocks,
//! and the commands that read, release and store transferred blocks between steps.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kiln_engine::{Engine, ExportedBlocks};

/// What handlers ask of the engine thread for a transfer.
pub enum TransferCommand {
    /// Sets how long finished requests' blocks stay pinned.
    SetTtl(Duration),
    /// The GPU block ids pinned for a request (`None`: nothing pinned).
    Pinned {
        id: u64,
        reply: flume::Sender<Option<Vec<u32>>>,
    },
    /// Reads a request's pinned blocks and unpins them.
    Export {
        id: u64,
        reply: flume::Sender<Result<Option<ExportedBlocks>, String>>,
    },
    /// Stores received blocks in the CPU tier under the request's cache salt; answers how
    /// many were stored.
    Import {
        keys: Vec<u64>,
        tokens: Vec<u32>,
        salt: Option<String>,
        data: Vec<u8>,
        reply: flume::Sender<Result<usize, String>>,
    },
}

/// When each pin expires.
pub struct Pins {
    ttl: Duration,
    deadlines: HashMap<u64, Instant>,
}

impl Default for Pins {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(60),
            deadlines: HashMap::new(),
        }
    }
}

impl Pins {
    /// Starts the clock of a finished request's pin, if it has one.
    pub fn finished(&mut self, engine: &Engine, id: u64) {
        if engine.scheduler().pinned(id).is_some() {
            self.deadlines.insert(id, Instant::now() + self.ttl);
        }
    }

    /// The earliest expiry, for the idle engine thread's wait.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.values().min().copied()
    }

    /// Unpins what nobody fetched in time.
    pub fn expire(&mut self, engine: &mut Engine) {
        let now = Instant::now();
        self.deadlines.retain(|&id, &mut d| {
            let live = d > now;
            if !live && engine.unpin(id) {
                tracing::warn!(
                    id,
                    "pinned KV blocks expired before a decode server fetched them"
                );
            }
            live
        });
    }

    /// Whether blocks wait, pinned, for a decode server to fetch them.
    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }

    /// The engine was rebuilt: its pins are gone.
    pub fn clear(&mut self) {
        self.deadlines.clear();
    }

    pub fn handle(&mut self, engine: &mut Engine, cmd: TransferCommand) {
        match cmd {
            TransferCommand::SetTtl(ttl) => self.ttl = ttl,
            TransferCommand::Pinned { id, reply } => {
                let blocks = engine.scheduler().pinned(id).map(|p| p.blocks.clone());
                let _ = reply.send(blocks);
            }
            TransferCommand::Export { id, reply } => {
                self.deadlines.remove(&id);
                let r = pollster::block_on(engine.export_pinned(id)).map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
            TransferCommand::Import {
                keys,
                tokens,
                salt,
                data,
                reply,
            } => {
                let r = engine
                    .import_blocks(&keys, &tokens, salt.as_deref(), &data)
                    .map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
        }
    }
}
