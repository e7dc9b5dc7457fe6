//! Requests through LoRA adapters: the engine holds the adapters by id (those it was built
//! with, and, where the runner has room for them, adapters loaded and unloaded while it
//! runs), checks each request's adapter, and gives its blocks a prefix-cache salt of the
//! adapter's, so cached blocks are shared only between requests through the same adapter (or
//! through none). The runner has a fixed number of adapter slots; more adapters than slots
//! may be loaded, and the scheduler puts each into a slot when a request needs it
//! (`kiln_scheduler`'s `lora_slots.rs`), the engine writing it there before the step runs.
//!
//! With [`crate::EngineConfig::max_cpu_loras`], at most that many adapters hold their values
//! in host memory: once more do, those used least recently that no request runs or waits
//! through let go of theirs (adapters read from files; those given as bytes keep them), and
//! are read again from their files when a request through one is added. Over the limit while
//! every held adapter has requests, the engine lets go once they are done (at the next
//! request or load).

use std::sync::Arc;

use kiln_gpu::GpuError;
use kiln_model::LoraAdapter;
use kiln_scheduler::{LoraLoad, LoraRef, Request};

use crate::{Engine, EngineError};

/// Which adapters requests use now ([`Engine::lora_requests`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoraRequests {
    pub running: Vec<String>,
    pub waiting: Vec<String>,
    /// The runner's adapter slots.
    pub slots: usize,
}

impl Engine {
    /// The LoRA adapters by id (`None`: an id unloaded and not yet given again).
    pub fn lora_adapters(&self) -> &[Option<Arc<LoraAdapter>>] {
        &self.lora
    }

    /// Whether adapters can be loaded while the engine runs ([`Engine::load_lora`]).
    pub fn lora_loadable(&self) -> bool {
        self.runner.lora_slots().1
    }

    /// The adapters running requests run through and those waiting requests need, by name,
    /// with the runner's slots (vLLM's `lora_requests_info`).
    pub fn lora_requests(&self) -> LoraRequests {
        let names = |ids: Vec<u32>| -> Vec<String> {
            (ids.into_iter())
                .filter_map(|id| Some(self.lora.get(id as usize)?.as_ref()?.name.clone()))
                .collect()
        };
        let (running, waiting) = self.scheduler.lora_requests();
        LoraRequests {
            running: names(running),
            waiting: names(waiting),
            slots: self.runner.lora_slots().0,
        }
    }

    /// The adapter named `name`, as a request refers to it.
    pub fn lora_ref(&self, name: &str) -> Option<LoraRef> {
        let id = (self.lora.iter()).position(|a| a.as_ref().is_some_and(|a| a.name == name))?;
        Some(LoraRef {
            id: id as u32,
            fingerprint: self.lora[id].as_ref()?.fingerprint,
        })
    }

    /// The prefix-cache salt `request`'s blocks get: its own, or its adapter's with it; an
    /// error if its adapter is not the one under the id it names.
    pub fn cache_salt(&self, request: &Request) -> Result<Option<String>, EngineError> {
        let Some(lora) = request.lora else {
            return Ok(request.cache_salt.clone());
        };
        match self.lora.get(lora.id as usize) {
            Some(Some(a)) if a.fingerprint == lora.fingerprint => {
                Ok(Some(a.salt(request.cache_salt.as_deref())))
            }
            _ => Err(EngineError::Config(format!(
                "request {}: its LoRA adapter is no longer loaded (id {})",
                request.id, lora.id
            ))),
        }
    }

    /// `request` checked and salted for its adapter, whose values are read again where they
    /// were let go.
    pub(crate) fn adapted(&mut self, request: Request) -> Result<Request, EngineError> {
        let request = Request {
            cache_salt: self.cache_salt(&request)?,
            ..request
        };
        if let Some(lora) = request.lora {
            let adapter = self.lora[lora.id as usize]
                .clone()
                .expect("checked for its salt");
            if !adapter.is_held() {
                adapter.pairs().map_err(|e| {
                    EngineError::Config(format!(
                        "reading LoRA adapter `{}` again: {e}",
                        adapter.name
                    ))
                })?;
                self.lora_reads += 1;
            }
            self.used_lora(lora.id);
        }
        Ok(request)
    }

    /// Counts adapter `id` as the one used most recently.
    fn used_lora(&mut self, id: u32) {
        self.lora_recent.retain(|&i| i != id);
        self.lora_recent.push(id);
    }

    /// Lets go of the values of the adapters used least recently that no request runs or
    /// waits through, until at most `max_cpu_loras` hold theirs.
    pub(crate) fn trim_loras(&mut self) {
        let Some(max) = self.max_cpu_loras else {
            return;
        };
        let mut held = (self.lora.iter().flatten()).filter(|a| a.is_held()).count();
        for &id in &self.lora_recent {
            if held <= max {
                break;
            }
            let Some(a) = &self.lora[id as usize] else {
                continue;
            };
            if a.is_held() && self.scheduler.requests_through(id) == 0 && a.let_go() {
                held -= 1;
            }
        }
    }

    /// Loads `adapter` and returns its id; requests may name it from the next step, and it
    /// takes a runner slot when one does. Needs the room of
    /// [`crate::EngineConfig::lora_capacity`]; its name must be new, its ranks within the
    /// capacity's. Beyond [`crate::EngineConfig::max_cpu_loras`], adapters used least
    /// recently let go of their values.
    pub fn load_lora(&mut self, adapter: Arc<LoraAdapter>) -> Result<u32, EngineError> {
        if self.lora_ref(&adapter.name).is_some() {
            return Err(EngineError::Config(format!(
                "a LoRA adapter named `{}` is already loaded",
                adapter.name
            )));
        }
        self.runner.check_lora(&adapter)?;
        let id = match self.lora.iter().position(Option::is_none) {
            Some(id) => id,
            None => {
                self.lora.push(None);
                self.lora.len() - 1
            }
        };
        self.lora[id] = Some(adapter);
        self.used_lora(id as u32);
        self.trim_loras();
        Ok(id as u32)
    }

    /// Puts `adapter` in the place of the loaded adapter of its name (vLLM's `load_inplace`,
    /// new weights under the same name) and returns its id. Checked first, so a refusal keeps
    /// the old one; refused while a request runs or waits through the old one. Requests
    /// through it find none of the old one's cached blocks (their keys hold its fingerprint).
    pub fn replace_lora(&mut self, adapter: Arc<LoraAdapter>) -> Result<u32, EngineError> {
        self.runner.check_lora(&adapter)?;
        self.unload_lora(&adapter.name)?;
        self.load_lora(adapter)
    }

    /// Unloads the adapter named `name` and returns its id; refused while a request runs
    /// or waits through it.
    pub fn unload_lora(&mut self, name: &str) -> Result<u32, EngineError> {
        let lora = self.lora_ref(name).ok_or_else(|| {
            EngineError::Config(format!("no LoRA adapter named `{name}` is loaded"))
        })?;
        if !self.scheduler.unload_lora(lora.id) {
            let using = self.scheduler.requests_through(lora.id);
            return Err(EngineError::Config(format!(
                "LoRA adapter `{name}` is in use by {using} requests"
            )));
        }
        self.lora[lora.id as usize] = None;
        self.lora_recent.retain(|&i| i != lora.id);
        Ok(lora.id)
    }

    /// Writes the adapters a step loads into their slots (queued before the step, after the
    /// one before it).
    pub(crate) fn write_lora_loads(&self, loads: &[LoraLoad]) -> Result<(), GpuError> {
        for load in loads {
            let adapter = self.lora.get(load.id as usize).and_then(Option::as_ref);
            let adapter = adapter.ok_or_else(|| {
                GpuError::Batch(format!("LoRA adapter {} is not loaded", load.id))
            })?;
            self.runner.set_lora(load.slot as usize, Some(adapter))?;
        }
        Ok(())
    }
}
