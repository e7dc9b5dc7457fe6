//! Requests through LoRA adapters: the engine holds the adapters by slot (those it was built
//! with, and, where it has room for them, adapters loaded and unloaded while it runs), checks
//! each request's adapter, and gives its blocks a prefix-cache salt of the adapter's, so
//! cached blocks are shared only between requests through the same adapter (or through none).

use std::sync::Arc;

use kiln_model::LoraAdapter;
use kiln_scheduler::{LoraRef, Request};

use crate::{Engine, EngineError};

impl Engine {
    /// The LoRA adapters by slot (`None`: an empty slot).
    pub fn lora_adapters(&self) -> &[Option<Arc<LoraAdapter>>] {
        &self.lora
    }

    /// Whether adapters can be loaded while the engine runs ([`Engine::load_lora`]).
    pub fn lora_loadable(&self) -> bool {
        self.runner.lora_slots().1
    }

    /// The adapter named `name`, as a request refers to it.
    pub fn lora_ref(&self, name: &str) -> Option<LoraRef> {
        let slot = (self.lora.iter()).position(|a| a.as_ref().is_some_and(|a| a.name == name))?;
        Some(LoraRef {
            slot: slot as u32,
            fingerprint: self.lora[slot].as_ref()?.fingerprint,
        })
    }

    /// The prefix-cache salt `request`'s blocks get: its own, or its adapter's with it; an
    /// error if its adapter is not in the slot it names.
    pub fn cache_salt(&self, request: &Request) -> Result<Option<String>, EngineError> {
        let Some(lora) = request.lora else {
            return Ok(request.cache_salt.clone());
        };
        match self.lora.get(lora.slot as usize) {
            Some(Some(a)) if a.fingerprint == lora.fingerprint => {
                Ok(Some(a.salt(request.cache_salt.as_deref())))
            }
            _ => Err(EngineError::Config(format!(
                "request {}: its LoRA adapter is no longer loaded (slot {})",
                request.id, lora.slot
            ))),
        }
    }

    /// `request` checked and salted for its adapter.
    pub(crate) fn adapted(&self, request: Request) -> Result<Request, EngineError> {
        Ok(Request {
            cache_salt: self.cache_salt(&request)?,
            ..request
        })
    }

    /// Loads `adapter` into a free slot and returns it; requests may name it from the next
    /// step. Needs the room of [`crate::EngineConfig::lora_capacity`]; its name must be new
    /// and its ranks within the capacity's.
    pub fn load_lora(&mut self, adapter: Arc<LoraAdapter>) -> Result<u32, EngineError> {
        if self.lora_ref(&adapter.name).is_some() {
            return Err(EngineError::Config(format!(
                "a LoRA adapter named `{}` is already loaded",
                adapter.name
            )));
        }
        let (slots, rewritable) = self.runner.lora_slots();
        let Some(slot) = self
            .lora
            .iter()
            .position(Option::is_none)
            .filter(|_| rewritable)
        else {
            return Err(EngineError::Config(match rewritable {
                true => format!("every one of the {slots} LoRA adapter slots is taken"),
                false => "the engine was built without room for LoRA adapters loaded while it runs"
                    .into(),
            }));
        };
        self.runner.set_lora(slot, Some(&adapter))?;
        self.lora[slot] = Some(adapter);
        Ok(slot as u32)
    }

    /// Unloads the adapter named `name` and returns its slot; refused while a request runs
    /// or waits through it.
    pub fn unload_lora(&mut self, name: &str) -> Result<u32, EngineError> {
        let lora = self.lora_ref(name).ok_or_else(|| {
            EngineError::Config(format!("no LoRA adapter named `{name}` is loaded"))
        })?;
        let using = self.scheduler.requests_through(lora.slot);
        if using > 0 {
            return Err(EngineError::Config(format!(
                "LoRA adapter `{name}` is in use by {using} requests"
            )));
        }
        self.runner.set_lora(lora.slot as usize, None)?;
        self.lora[lora.slot as usize] = None;
        Ok(lora.slot)
    }
}
