//! Requests through LoRA adapters: the engine holds the adapters the runner was built with
//! (by slot) and gives each request through one a prefix-cache salt of its own, so cached
//! blocks are shared only between requests through the same adapter (or through none).

use std::sync::Arc;

use kiln_model::LoraAdapter;
use kiln_scheduler::Request;

use crate::{Engine, EngineError};

impl Engine {
    /// The LoRA adapters requests may name, by slot.
    pub fn lora_adapters(&self) -> &[Arc<LoraAdapter>] {
        &self.lora
    }

    /// The prefix-cache salt `request`'s blocks get: its own, or its adapter's with it.
    pub fn cache_salt(&self, request: &Request) -> Result<Option<String>, EngineError> {
        let Some(slot) = request.lora else {
            return Ok(request.cache_salt.clone());
        };
        let adapter = self.lora.get(slot as usize).ok_or_else(|| {
            EngineError::Config(format!(
                "request {} asks for LoRA adapter {slot}; the engine holds {}",
                request.id,
                self.lora.len()
            ))
        })?;
        Ok(Some(adapter.salt(request.cache_salt.as_deref())))
    }

    /// `request` checked and salted for its adapter.
    pub(crate) fn adapted(&self, request: Request) -> Result<Request, EngineError> {
        Ok(Request {
            cache_salt: self.cache_salt(&request)?,
            ..request
        })
    }
}
