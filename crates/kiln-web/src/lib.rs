//! kiln in the browser: the engine exposed to JavaScript with wasm-bindgen, on WebGPU.
//!
//! JavaScript opens the GPU with [`open_gpu`], loads a model from bytes into a [`WebEngine`]
//! ([`WebEngine::load_gguf`] or [`WebEngine::load_hf`]), starts generations with
//! [`WebEngine::start`] and drives them by awaiting [`WebEngine::step`] in a loop while
//! [`WebEngine::has_work`]. Every step is one forward pass for all active generations
//! (continuous batching); each new token reaches its generation's callback as an event
//! `{id, tokenId, text, finished, numTokens}` and is also in the array `step()` resolves to.
//! [`WebEngine::stop`] ends a generation at the next step.
//!
//! No threads and no blocking waits: the only waits are the GPU readbacks, awaited as promises.
//! Starts and stops issued while a step is in flight are queued and applied at the next step,
//! and callbacks run after the engine is released, so they may call back into the engine.

mod engine;
mod events;
mod gpu;
mod options;

use js_sys::{Object, Reflect};
use kiln_engine::{EngineConfig, KernelFamily, KvDtype, KvSize, Overlap, WeightStorage};
use wasm_bindgen::prelude::*;

pub use engine::WebEngine;
pub use gpu::{WebGpu, open_gpu};

/// The engine sizes the browser build uses; the native fixture of `scripts/test-web.sh` uses
/// the same so both run the same schedule.
pub fn engine_config(kv_bytes: u64, max_seqs: usize) -> EngineConfig {
    EngineConfig {
        max_num_batched_tokens: 256,
        max_num_seqs: max_seqs.max(1),
        kv: KvSize::Bytes(kv_bytes),
        cpu_kv_bytes: 0,
        enable_prefix_caching: true,
        max_model_len: None,
        kernels: KernelFamily::Auto,
        kv_dtype: KvDtype::F16,
        // A tab's memory is scarce: quantized matrices stay quantized whatever the kernels.
        weights: WeightStorage::Quantized,
        // The next step is submitted while the page reads this one's tokens (not on a
        // CPU-backed adapter, such as SwiftShader).
        overlap: Overlap::Auto,
        // Speculative decoding: `speculativeTokens` in `load`'s options (engine.rs).
        speculation: None,
        // LoRA adapters: `lora` in `load`'s options (engine.rs), each in a slot of its own.
        lora: Vec::new(),
        lora_capacity: None,
        max_cpu_loras: None,
        // The KV pool cleared and one step run as the model loads (queued ahead of the first
        // request's step, which then does not wait for the pool's first use).
        warm_up: true,
    }
}

fn err(e: impl std::fmt::Display) -> JsValue {
    JsValue::from(js_sys::Error::new(&e.to_string()))
}

fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value.into());
}

#[wasm_bindgen(start)]
pub fn init_panic_hook() {
    #[cfg(target_arch = "wasm32")]
    console_error_panic_hook::set_once();
}
