//! LoRA adapters loaded and unloaded while the model runs, where `loadModel`'s `loraSlots`
//! made room for them: queued like starts and applied at the next step, before the starts
//! queued after them, so a generation may name an adapter as soon as it is loaded. Any number
//! may be loaded; generations through more adapters than slots take turns (the scheduler's
//! slots, as in the server).

use super::*;

#[wasm_bindgen]
impl WebEngine {
    /// Loads a LoRA adapter, `{name, gguf}` or `{name, config, safetensors}` as `loadModel`'s
    /// `lora` takes them; generations may name it from now on. Refused without `loraSlots`,
    /// for a name already loaded (or still unloading), or for an adapter of more than
    /// `loraRank` or for another model.
    pub fn load_lora(&mut self, adapter: JsValue) -> Result<(), JsValue> {
        let mut loras = self.loras.borrow_mut();
        let room = loras.room.ok_or_else(|| {
            err("no room for LoRA adapters loaded while the model runs: load it with loraSlots")
        })?;
        let adapter = lora_adapter(&adapter, "adapter", &self.config)?;
        let name = &adapter.name;
        if loras.names.contains(name) || loras.unloading.contains(name) {
            return Err(err(format!(
                "a LoRA adapter named `{name}` is already loaded"
            )));
        }
        if adapter.rank > room.rank {
            return Err(err(format!(
                "LoRA adapter `{name}` has rank {}, more than loraRank {}",
                adapter.rank, room.rank
            )));
        }
        loras.names.push(name.clone());
        (self.pending.borrow_mut()).push_back(Command::LoadLora(Arc::new(adapter)));
        Ok(())
    }

    /// Unloads LoRA adapter `name`: generations may no longer name it, and it leaves the
    /// engine once none runs through it.
    pub fn unload_lora(&mut self, name: &str) -> Result<(), JsValue> {
        let mut loras = self.loras.borrow_mut();
        let Some(at) = loras.names.iter().position(|n| n == name) else {
            return Err(err(format!("no LoRA adapter named `{name}` is loaded")));
        };
        let name = loras.names.remove(at);
        loras.unloading.push(name);
        (self.pending.borrow_mut()).push_back(Command::UnloadLora);
        Ok(())
    }
}

/// Applies a queued load (`Some`) or unload, or retries the unloads waiting for their
/// generations (`None`). A load the engine refuses after the checks above is dropped from
/// the names and logged.
pub(super) fn apply(engine: &mut Engine, loras: &RefCell<Loras>, cmd: Option<Command>) {
    match cmd {
        Some(Command::LoadLora(a)) => {
            if let Err(e) = engine.load_lora(a.clone()) {
                web_log(&format!("LoRA adapter `{}` not loaded: {e}", a.name));
                loras.borrow_mut().names.retain(|n| *n != a.name);
            }
        }
        Some(Command::UnloadLora) | None => {
            // Each unload that no generation holds up any more goes now.
            let mut l = loras.borrow_mut();
            l.unloading
                .retain(|n| engine.unload_lora(n).is_err() && engine.lora_ref(n).is_some());
        }
        Some(_) => {}
    }
}
