//! LoRA adapters as the handlers see them: a registry of the engine's adapters by id, which
//! the engine thread refreshes whenever they change (an adapter loaded or unloaded through the
//! API, or the engine rebuilt), and the commands that load and unload them there.

use std::sync::{Arc, RwLock};

use kiln_engine::{Engine, LoraRef, LoraRequests};
use kiln_model::LoraAdapter;

use super::{Command, EngineHandle};

/// What a handler asks of the engine thread about adapters; each answers with the id.
pub enum LoraCommand {
    Load(Arc<LoraAdapter>, flume::Sender<Result<u32, String>>),
    /// Loads an adapter in the place of the one of its name.
    Replace(Arc<LoraAdapter>, flume::Sender<Result<u32, String>>),
    Unload(String, flume::Sender<Result<u32, String>>),
}

/// The engine's adapters by id, as of the last change, and which of them requests used as of
/// the engine thread's last snapshot.
#[derive(Clone, Default)]
pub struct LoraRegistry {
    adapters: Arc<RwLock<Vec<Option<Arc<LoraAdapter>>>>>,
    requests: Arc<RwLock<LoraRequests>>,
}

impl LoraRegistry {
    /// Takes the engine's adapters.
    pub(super) fn refresh(&self, engine: &Engine) {
        *self.adapters.write().unwrap_or_else(|e| e.into_inner()) = engine.lora_adapters().to_vec();
    }

    /// Takes which adapters the engine's requests use (where it has any slots).
    pub(super) fn note_requests(&self, engine: &Engine) {
        if engine.lora_adapters().is_empty() && !engine.lora_loadable() {
            return;
        }
        *self.requests.write().unwrap_or_else(|e| e.into_inner()) = engine.lora_requests();
    }

    /// The adapters requests used as of the last snapshot.
    pub fn requests(&self) -> LoraRequests {
        self.requests
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The loaded adapters with their ids, in id order.
    pub fn loaded(&self) -> Vec<(u32, Arc<LoraAdapter>)> {
        let ids = self.adapters.read().unwrap_or_else(|e| e.into_inner());
        (ids.iter().enumerate())
            .filter_map(|(id, a)| Some((id as u32, a.clone()?)))
            .collect()
    }

    /// The adapter named `name`, as a request refers to it.
    pub fn find(&self, name: &str) -> Option<(LoraRef, Arc<LoraAdapter>)> {
        let (id, a) = self.loaded().into_iter().find(|(_, a)| a.name == name)?;
        let r = LoraRef {
            id,
            fingerprint: a.fingerprint,
        };
        Some((r, a))
    }

    /// The adapter a request refers to, while it is loaded.
    pub fn get(&self, r: LoraRef) -> Option<Arc<LoraAdapter>> {
        let ids = self.adapters.read().unwrap_or_else(|e| e.into_inner());
        let a = ids.get(r.id as usize)?.as_ref()?;
        (a.fingerprint == r.fingerprint).then(|| a.clone())
    }
}

impl EngineHandle {
    /// Loads `adapter` into the engine (which puts it into a slot of its room for adapters
    /// when requests need it); the answer is its id, or why not.
    pub async fn load_lora(&self, adapter: Arc<LoraAdapter>) -> Result<u32, String> {
        self.lora_command(|tx| LoraCommand::Load(adapter, tx)).await
    }

    /// Loads `adapter` in the place of the loaded one of its name (vLLM's `load_inplace`);
    /// refused while a request runs through that one.
    pub async fn replace_lora(&self, adapter: Arc<LoraAdapter>) -> Result<u32, String> {
        self.lora_command(|tx| LoraCommand::Replace(adapter, tx))
            .await
    }

    /// Unloads the adapter named `name`; refused while a request runs through it.
    pub async fn unload_lora(&self, name: String) -> Result<u32, String> {
        self.lora_command(|tx| LoraCommand::Unload(name, tx)).await
    }

    async fn lora_command(
        &self,
        cmd: impl FnOnce(flume::Sender<Result<u32, String>>) -> LoraCommand,
    ) -> Result<u32, String> {
        let (tx, rx) = flume::bounded(1);
        let gone = || "the engine thread is gone".to_string();
        (self.commands)
            .send(Command::Lora(cmd(tx)))
            .map_err(|_| gone())?;
        rx.recv_async().await.map_err(|_| gone())?
    }
}
