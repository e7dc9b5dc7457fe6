//! LoRA adapters loaded into a runner's slots, and taken out, while it runs: where it was built
//! with room for them ([`crate::ops::LoraCapacity`]), every projection has a stack with a slot
//! for each, and a slot is rewritten in place (queued like a step's upload: a step submitted
//! before keeps what it read).

use kiln_model::LoraAdapter;

use super::ModelRunner;
use crate::GpuError;

impl ModelRunner {
    /// How many adapters the runner has slots for, and whether they can be rewritten.
    pub fn lora_slots(&self) -> (usize, bool) {
        (self.lora_slots, self.lora_capacity.is_some())
    }

    /// Whether `adapter` can be written into a slot: the runner has room for adapters loaded
    /// while it runs, and the adapter fits each projection's stack (its ranks within the
    /// capacity's).
    pub fn check_lora(&self, adapter: &LoraAdapter) -> Result<(), GpuError> {
        if self.lora_capacity.is_none() {
            return Err(GpuError::Capacity {
                what: "LoRA adapters loaded while running (built without room for them)",
                needed: 1,
                max: 0,
            });
        }
        for layer in &self.layers {
            layer.check_lora(adapter)?;
        }
        Ok(())
    }

    /// Writes `adapter` into slot `slot` of every projection's stack, or empties the slot
    /// (`None`), after checking that it fits each ([`Self::check_lora`]).
    pub fn set_lora(&self, slot: usize, adapter: Option<&LoraAdapter>) -> Result<(), GpuError> {
        if let Some(a) = adapter {
            self.check_lora(a)?;
        } else if self.lora_capacity.is_none() {
            return Err(GpuError::Capacity {
                what: "LoRA adapters loaded while running (built without room for them)",
                needed: 1,
                max: 0,
            });
        }
        if slot >= self.lora_slots {
            return Err(GpuError::Capacity {
                what: "LoRA adapter slots",
                needed: slot + 1,
                max: self.lora_slots,
            });
        }
        // Its values, read again from its file where they were let go.
        let pairs = adapter.map(LoraAdapter::pairs).transpose()?;
        for layer in &self.layers {
            layer.set_lora(&self.ctx, slot, pairs.as_deref());
        }
        Ok(())
    }
}
