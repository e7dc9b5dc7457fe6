//! [`WebEngine`]: a model on the GPU with its scheduler, driven one step at a time from
//! JavaScript; any number of generations share it.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use js_sys::{Array, Function, Object, Reflect, Uint8Array};
use kiln_engine::{
    Constraint, Engine, EngineConfig, GrammarCompiler, KernelFamily, KvDtype, LoraCapacity,
    Request, Speculation,
};
use kiln_frontend::tools::ToolPlan;
use kiln_frontend::{ChatExtras, Frontend, ReasoningFormat, chat_logprobs, requested_grammar};
use kiln_model::{ChatMessage, LoraAdapter, Model, ModelConfig};
use wasm_bindgen::prelude::*;

use crate::events::{Chat, ChatTools, Event, handle, web_log};
use crate::gpu::{DEVICE_LOST, GPU_ERROR, WebGpu};
use crate::options::{
    DEFAULT_MAX_TOKENS, StartParams, count, lora_adapter, lora_adapters, parsed, start_params,
};
use crate::{engine_config, err, set};

mod chat;
mod embed;
mod generate;
mod lora;
mod step;

struct Start {
    request: Request,
    chat: Chat,
    constraint: Option<Constraint>,
    /// The LoRA adapter it runs through, by name: looked up when the start is applied, after
    /// the adapters loaded before it.
    lora: Option<String>,
}

enum Command {
    Start(Box<Start>),
    Stop(u64),
    LoadLora(Arc<LoraAdapter>),
    /// The adapters in [`Loras::unloading`] leave the engine, those no generation holds.
    UnloadLora,
}

struct Inner {
    engine: Engine,
    chats: HashMap<u64, Chat>,
}

/// The LoRA adapters generations may name, and those unloaded but still in the engine
/// (a generation runs through them: they leave once none does). Kept outside the engine,
/// which a step in flight holds.
#[derive(Default)]
struct Loras {
    names: Vec<String>,
    unloading: Vec<String>,
    /// Room for adapters loaded while the model runs (`loadModel`'s `loraSlots`).
    room: Option<LoraCapacity>,
}

/// What `info()` reports of the engine, kept outside it: a step in flight holds the engine
/// (`Inner`) across its await, and `info()` may be called meanwhile.
#[derive(Clone, Copy, Default)]
struct Sizes {
    max_seqs: usize,
    max_tokens: usize,
    num_blocks: usize,
    /// Guesses made and confirmed so far (speculative decoding), as of the last step.
    guesses: (u64, u64),
}

/// A model on the GPU with its scheduler; any number of generations share it.
#[wasm_bindgen]
pub struct WebEngine {
    inner: Rc<RefCell<Inner>>,
    pending: Rc<RefCell<VecDeque<Command>>>,
    frontend: Rc<Frontend>,
    /// The grammar compiler for structured outputs, built on first use.
    constraints: GrammarCompiler,
    config: ModelConfig,
    source: String,
    max_len: usize,
    kv_dtype: KvDtype,
    loras: Rc<RefCell<Loras>>,
    sizes: Rc<Cell<Sizes>>,
    next_id: u64,
}

impl WebEngine {
    /// A matcher for `grammar`, from the model's grammar compiler (built on first use).
    fn compile(&self, grammar: &kiln_engine::Grammar) -> Result<Constraint, JsValue> {
        let f = &self.frontend;
        (self.constraints)
            .compile(grammar, &f.tokenizer, &f.eos_token_ids, f.vocab_size)
            .map_err(|e| err(e.to_string()))
    }

    fn build(
        gpu: &WebGpu,
        model: Model,
        options: &JsValue,
        progress: Option<Function>,
    ) -> Result<WebEngine, JsValue> {
        let kv_mib = count(options, "kvMiB", 1)?.unwrap_or(128);
        let max_seqs = count(options, "maxSeqs", 1)?.unwrap_or(8);
        let kernels = parsed::<KernelFamily>(options, "kernels")?.unwrap_or_default();
        let kv_dtype = parsed::<KvDtype>(options, "kvDtype")?.unwrap_or_default();
        let guesses = count(options, "speculativeTokens", 0)?.unwrap_or(0);
        let mut report = |done: usize, total: usize| {
            if let Some(f) = &progress {
                let _ = f.call2(
                    &JsValue::NULL,
                    &JsValue::from(done as f64),
                    &JsValue::from(total as f64),
                );
            }
        };
        let lora = lora_adapters(options, &model.config)?;
        let names: Vec<String> = lora.iter().map(|a| a.name.clone()).collect();
        let slots = count(options, "loraSlots", 0)?.unwrap_or(0);
        let rank = count(options, "loraRank", 1)?.unwrap_or(16);
        let room = (slots > 0).then_some(LoraCapacity { slots, rank });
        let engine = Engine::new(
            &gpu.ctx,
            &model.config,
            &model.weights,
            EngineConfig {
                kernels,
                kv_dtype,
                speculation: (guesses > 0).then(|| Speculation::prompt_lookup(guesses)),
                lora,
                lora_capacity: room,
                ..engine_config((kv_mib as u64) << 20, max_seqs)
            },
            &mut report,
        )
        .map_err(err)?;
        let max_len = engine.max_len();
        let rc = engine.runner_config();
        let sizes = Sizes {
            max_seqs: rc.max_seqs,
            max_tokens: rc.max_tokens,
            num_blocks: rc.num_blocks,
            guesses: (0, 0),
        };
        let Model {
            config,
            tokenizer,
            chat_template,
            source,
            ..
        } = model;
        Ok(WebEngine {
            inner: Rc::new(RefCell::new(Inner {
                engine,
                chats: HashMap::new(),
            })),
            pending: Rc::new(RefCell::new(VecDeque::new())),
            frontend: Rc::new(Frontend::new(tokenizer, chat_template, &config)),
            constraints: GrammarCompiler::default(),
            config,
            source,
            max_len,
            kv_dtype,
            loras: Rc::new(RefCell::new(Loras {
                names,
                unloading: Vec::new(),
                room,
            })),
            sizes: Rc::new(Cell::new(sizes)),
            next_id: 1,
        })
    }
}

#[wasm_bindgen]
impl WebEngine {
    /// Loads a GGUF model from its bytes and uploads it. `options`: `{kvMiB, maxSeqs, kernels:
    /// "auto"|"gpu"|"cpu", kvDtype: "f16"|"f32"|"q8_0"|"fp8", speculativeTokens, lora,
    /// loraSlots, loraRank}` (`lora`: adapters, each `{name, gguf}` or `{name, config,
    /// safetensors}`, that a generation's `lora` parameter names; `loraSlots`: room on the GPU
    /// for that many adapters of rank up to `loraRank` (16), so that adapters may be loaded
    /// while the model runs, [`WebEngine::load_lora`]);
    /// `progress(done, total)` is called while weights upload.
    pub fn load_gguf(
        gpu: &WebGpu,
        bytes: Vec<u8>,
        name: &str,
        options: JsValue,
        progress: Option<Function>,
    ) -> Result<WebEngine, JsValue> {
        let model = Model::from_gguf_bytes(bytes, name).map_err(err)?;
        Self::build(gpu, model, &options, progress)
    }

    /// Loads a Hugging Face model from an object mapping file names (`config.json`,
    /// `tokenizer.json`, `model.safetensors`, ...) to `Uint8Array`s; `name` (the folder's URL,
    /// say) is the model's source in `info()`.
    pub fn load_hf(
        gpu: &WebGpu,
        files: Object,
        name: &str,
        options: JsValue,
        progress: Option<Function>,
    ) -> Result<WebEngine, JsValue> {
        let mut map = HashMap::new();
        for key in Object::keys(&files).iter() {
            let name = key
                .as_string()
                .ok_or_else(|| err("file names must be strings"))?;
            let value = Reflect::get(&files, &key)?;
            let bytes = value
                .dyn_into::<Uint8Array>()
                .map_err(|_| err(format!("{name}: expected a Uint8Array")))?
                .to_vec();
            map.insert(name, bytes);
        }
        let mut model = Model::from_hf_bytes(map).map_err(err)?;
        model.source = name.to_string();
        Self::build(gpu, model, &options, progress)
    }

    /// A description of the loaded model and the engine's sizes (callable at any time, a
    /// step in flight included).
    pub fn info(&self) -> Object {
        let c = &self.config;
        let sizes = self.sizes.get();
        let o = Object::new();
        set(&o, "source", self.source.as_str());
        set(&o, "architecture", format!("{:?}", c.architecture));
        set(&o, "layers", c.num_layers as f64);
        set(&o, "hidden", c.hidden_size as f64);
        set(&o, "vocab", c.vocab_size as f64);
        set(&o, "maxLen", self.max_len as f64);
        set(&o, "maxSeqs", sizes.max_seqs as f64);
        set(&o, "maxBatchedTokens", sizes.max_tokens as f64);
        set(&o, "kvBlocks", sizes.num_blocks as f64);
        set(&o, "kvDtype", self.kv_dtype.name());
        let loras = Array::new();
        for name in &self.loras.borrow().names {
            loras.push(&JsValue::from_str(name));
        }
        set(&o, "loras", loras);
        let room = self.loras.borrow().room;
        set(&o, "loraSlots", room.map_or(0, |r| r.slots) as f64);
        set(&o, "guessesMade", sizes.guesses.0 as f64);
        set(&o, "guessesConfirmed", sizes.guesses.1 as f64);
        set(&o, "hasChatTemplate", self.frontend.chat_template.is_some());
        o
    }

    /// Token ids of `text`.
    pub fn tokenize(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, JsValue> {
        self.frontend
            .tokenizer
            .encode(text, add_special_tokens)
            .map_err(err)
    }

    pub fn decode(&self, ids: Vec<u32>, skip_special_tokens: bool) -> Result<String, JsValue> {
        self.frontend
            .tokenizer
            .decode(&ids, skip_special_tokens)
            .map_err(err)
    }

    /// Renders `[{role, content}, ...]` (as JSON text) with the model's chat template (ChatML
    /// if it has none), ending with the assistant's turn.
    pub fn chat_prompt(&self, messages_json: &str) -> Result<String, JsValue> {
        let messages: Vec<ChatMessage> = serde_json::from_str(messages_json).map_err(err)?;
        self.frontend
            .render_chat(messages, &ChatExtras::default())
            .map_err(err)
    }

    /// The tokens of a chat (`[{role, content}, ...]` as JSON) ready for generation.
    pub fn chat_tokens(&self, messages_json: &str) -> Result<Vec<u32>, JsValue> {
        let messages: Vec<ChatMessage> = serde_json::from_str(messages_json).map_err(err)?;
        self.frontend.chat_tokens(messages, None).map_err(err)
    }

    /// The tokens of a chat (`[{role, content}, ...]` as JSON) ready for generation, with at
    /// least `room` tokens left for the reply (default: 256, or a quarter of the context if
    /// less): where the whole chat leaves less, its oldest exchanges are left out (the system
    /// messages and the latest exchange kept; `kept`: the last turn's `leftOut`, kept while the
    /// rest fits, so the turns after a cut extend one prompt). `{tokens, leftOut}`: the prompt
    /// and how many messages were left out.
    pub fn fit_chat(
        &self,
        messages_json: &str,
        room: Option<u32>,
        kept: Option<u32>,
    ) -> Result<Object, JsValue> {
        let messages: Vec<ChatMessage> = serde_json::from_str(messages_json).map_err(err)?;
        let room = room.map_or(DEFAULT_MAX_TOKENS.min(self.max_len / 4), |r| r as usize);
        let fitted = (self.frontend)
            .fit_chat(
                messages,
                &ChatExtras::default(),
                self.max_len,
                room,
                kept.unwrap_or(0) as usize,
            )
            .map_err(err)?;
        let o = Object::new();
        set(
            &o,
            "tokens",
            js_sys::Uint32Array::from(fitted.prompt.as_slice()),
        );
        set(&o, "leftOut", fitted.dropped as f64);
        Ok(o)
    }

    /// Stops generation `id` at the next step (its callback gets `finished: "abort"`).
    pub fn stop(&self, id: f64) {
        self.pending
            .borrow_mut()
            .push_back(Command::Stop(id as u64));
    }

    /// Whether a `step()` has anything to do.
    pub fn has_work(&self) -> bool {
        if !self.pending.borrow().is_empty() {
            return true;
        }
        match self.inner.try_borrow() {
            Ok(inner) => inner.engine.has_unfinished(),
            Err(_) => true, // a step is in flight
        }
    }

    /// Generations running or waiting.
    pub fn num_active(&self) -> usize {
        match self.inner.try_borrow() {
            Ok(inner) => inner.chats.len(),
            Err(_) => 0,
        }
    }
}
