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

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Mutex;

use js_sys::{Array, Function, Object, Reflect, Uint8Array};
use kiln_engine::{
    Engine, EngineConfig, FinishReason, IncrementalDecoder, KernelFamily, KvDtype, KvSize, Request,
    RequestUpdate, SamplingParams, WeightStorage,
};
use kiln_gpu::GpuContext;
use kiln_model::{ChatMessage, ChatTemplate, Model, ModelConfig, Tokenizer};
use wasm_bindgen::prelude::*;

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
    }
}

fn err(e: impl std::fmt::Display) -> JsValue {
    JsValue::from(js_sys::Error::new(&e.to_string()))
}

fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value.into());
}

/// Why the device was lost or the last uncaptured GPU error; set from wgpu's callbacks, which
/// must be `Send`, so they only record it here and JavaScript reads it.
static DEVICE_LOST: Mutex<Option<String>> = Mutex::new(None);
static GPU_ERROR: Mutex<Option<String>> = Mutex::new(None);

#[wasm_bindgen(start)]
pub fn init_panic_hook() {
    #[cfg(target_arch = "wasm32")]
    console_error_panic_hook::set_once();
}

/// An opened GPU device.
#[wasm_bindgen]
pub struct WebGpu {
    ctx: GpuContext,
    adapter_features: wgpu::Features,
    adapter_limits: wgpu::Limits,
}

/// Opens the browser's WebGPU adapter. `default_limits`: ask only for WebGPU's default limits
/// (128 MiB per storage binding, 256 invocations per workgroup, 16 KiB of workgroup storage,
/// 8 storage buffers per stage) instead of the adapter's own. shader-f16 is never required.
#[wasm_bindgen]
pub async fn open_gpu(default_limits: bool) -> Result<WebGpu, JsValue> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        })
        .await
        .map_err(|e| err(format!("no WebGPU adapter: {e}")))?;
    let adapter_features = adapter.features();
    let adapter_limits = adapter.limits();
    let ctx = if default_limits {
        let info = adapter.get_info();
        let limits = wgpu::Limits::default();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("kiln"),
                required_features: wgpu::Features::empty(),
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| err(format!("requesting a device: {e}")))?;
        GpuContext {
            device,
            queue,
            info,
            features: wgpu::Features::empty(),
            limits,
            faults: Default::default(),
        }
    } else {
        GpuContext::from_adapter(adapter).await.map_err(err)?
    };
    *DEVICE_LOST.lock().unwrap() = None;
    *GPU_ERROR.lock().unwrap() = None;
    ctx.device.set_device_lost_callback(|reason, message| {
        *DEVICE_LOST.lock().unwrap() = Some(format!("{reason:?}: {message}"));
    });
    ctx.device
        .on_uncaptured_error(std::sync::Arc::new(|e: wgpu::Error| {
            let mut slot = GPU_ERROR.lock().unwrap();
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
    Ok(WebGpu {
        ctx,
        adapter_features,
        adapter_limits,
    })
}

fn feature_names(f: wgpu::Features) -> Array {
    f.iter()
        .filter_map(|x| x.as_str())
        .map(JsValue::from_str)
        .collect()
}

#[wasm_bindgen]
impl WebGpu {
    /// The adapter's name, e.g. "SwiftShader Device (Subzero)".
    #[wasm_bindgen(getter)]
    pub fn adapter_name(&self) -> String {
        self.ctx.info.name.clone()
    }

    /// A line naming the adapter, backend and driver.
    pub fn describe(&self) -> String {
        let i = &self.ctx.info;
        let mut s = format!("{} ({:?}", i.name, i.backend);
        for part in [&i.driver, &i.driver_info] {
            if !part.is_empty() {
                s.push_str(", ");
                s.push_str(part);
            }
        }
        s.push(')');
        s
    }

    /// The adapter's features (WebGPU names).
    pub fn adapter_features(&self) -> Array {
        feature_names(self.adapter_features)
    }

    /// The features the device was opened with.
    pub fn device_features(&self) -> Array {
        feature_names(self.ctx.features)
    }

    /// The limits that matter to kiln: `{adapter: {...}, device: {...}}`.
    pub fn limits(&self) -> Object {
        let one = |l: &wgpu::Limits| {
            let o = Object::new();
            set(
                &o,
                "maxStorageBufferBindingSize",
                l.max_storage_buffer_binding_size as f64,
            );
            set(&o, "maxBufferSize", l.max_buffer_size as f64);
            set(
                &o,
                "maxStorageBuffersPerShaderStage",
                l.max_storage_buffers_per_shader_stage,
            );
            set(
                &o,
                "maxComputeWorkgroupStorageSize",
                l.max_compute_workgroup_storage_size,
            );
            set(
                &o,
                "maxComputeInvocationsPerWorkgroup",
                l.max_compute_invocations_per_workgroup,
            );
            o
        };
        let o = Object::new();
        set(&o, "adapter", one(&self.adapter_limits));
        set(&o, "device", one(&self.ctx.limits));
        o
    }

    /// Why the device was lost, if it was.
    pub fn lost(&self) -> Option<String> {
        DEVICE_LOST.lock().unwrap().clone()
    }

    /// The first uncaptured GPU error (validation, out of memory), if any.
    pub fn error(&self) -> Option<String> {
        GPU_ERROR.lock().unwrap().clone()
    }
}

struct Chat {
    decoder: IncrementalDecoder,
    callback: Option<Function>,
    num_tokens: u32,
}

enum Command {
    Start(Box<(Request, Chat)>),
    Stop(u64),
}

struct Inner {
    engine: Engine,
    chats: HashMap<u64, Chat>,
}

/// One token of one generation, ready for JavaScript.
struct Event {
    id: u64,
    token_id: Option<u32>,
    text: String,
    finished: Option<String>,
    num_tokens: u32,
    callback: Option<Function>,
}

impl Event {
    fn to_js(&self) -> Object {
        let o = Object::new();
        set(&o, "id", self.id as f64);
        set(
            &o,
            "tokenId",
            self.token_id.map(JsValue::from).unwrap_or(JsValue::NULL),
        );
        set(&o, "text", self.text.as_str());
        set(
            &o,
            "finished",
            self.finished
                .as_deref()
                .map(JsValue::from_str)
                .unwrap_or(JsValue::NULL),
        );
        set(&o, "numTokens", self.num_tokens);
        o
    }
}

fn finish_name(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Abort => "abort",
    }
}

/// A model on the GPU with its scheduler; any number of generations share it.
#[wasm_bindgen]
pub struct WebEngine {
    inner: Rc<RefCell<Inner>>,
    pending: Rc<RefCell<VecDeque<Command>>>,
    tokenizer: Rc<Tokenizer>,
    chat_template: Option<ChatTemplate>,
    config: ModelConfig,
    source: String,
    max_len: usize,
    next_id: u64,
}

fn num(obj: &JsValue, key: &str) -> Result<Option<f64>, JsValue> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(None);
    }
    let v = Reflect::get(obj, &JsValue::from_str(key))?;
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_f64()
        .map(Some)
        .ok_or_else(|| err(format!("{key} must be a number")))
}

/// A string option parsed with `FromStr`; `None` when absent.
fn parsed<T: std::str::FromStr<Err = String>>(
    obj: &JsValue,
    key: &str,
) -> Result<Option<T>, JsValue> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(None);
    }
    let v = Reflect::get(obj, &JsValue::from_str(key))?;
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    let text = v
        .as_string()
        .ok_or_else(|| err(format!("{key} must be a string")))?;
    text.parse()
        .map(Some)
        .map_err(|e: String| err(format!("{key}: {e}")))
}

fn flag(obj: &JsValue, key: &str) -> Result<bool, JsValue> {
    if obj.is_undefined() || obj.is_null() {
        return Ok(false);
    }
    Ok(Reflect::get(obj, &JsValue::from_str(key))?.is_truthy())
}

impl WebEngine {
    fn build(
        gpu: &WebGpu,
        model: Model,
        options: &JsValue,
        progress: Option<Function>,
    ) -> Result<WebEngine, JsValue> {
        let kv_mib = num(options, "kvMiB")?.unwrap_or(128.0).max(1.0);
        let max_seqs = num(options, "maxSeqs")?.unwrap_or(8.0) as usize;
        let kernels = parsed::<KernelFamily>(options, "kernels")?.unwrap_or_default();
        let kv_dtype = parsed::<KvDtype>(options, "kvDtype")?.unwrap_or_default();
        let mut report = |done: usize, total: usize| {
            if let Some(f) = &progress {
                let _ = f.call2(
                    &JsValue::NULL,
                    &JsValue::from(done as f64),
                    &JsValue::from(total as f64),
                );
            }
        };
        let engine = Engine::new(
            &gpu.ctx,
            &model.config,
            &model.weights,
            EngineConfig {
                kernels,
                kv_dtype,
                ..engine_config((kv_mib * (1 << 20) as f64) as u64, max_seqs)
            },
            &mut report,
        )
        .map_err(err)?;
        let max_len = engine.max_len();
        Ok(WebEngine {
            inner: Rc::new(RefCell::new(Inner {
                engine,
                chats: HashMap::new(),
            })),
            pending: Rc::new(RefCell::new(VecDeque::new())),
            tokenizer: Rc::new(model.tokenizer),
            chat_template: model.chat_template,
            config: model.config,
            source: model.source,
            max_len,
            next_id: 1,
        })
    }
}

#[wasm_bindgen]
impl WebEngine {
    /// Loads a GGUF model from its bytes and uploads it. `options`: `{kvMiB, maxSeqs, kernels:
    /// "auto"|"gpu"|"cpu", kvDtype: "f16"|"f32"}`;
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
    /// `tokenizer.json`, `model.safetensors`, ...) to `Uint8Array`s.
    pub fn load_hf(
        gpu: &WebGpu,
        files: Object,
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
        let model = Model::from_hf_bytes(map).map_err(err)?;
        Self::build(gpu, model, &options, progress)
    }

    /// A description of the loaded model and the engine's sizes.
    pub fn info(&self) -> Object {
        let c = &self.config;
        let inner = self.inner.borrow();
        let rc = inner.engine.runner_config();
        let o = Object::new();
        set(&o, "source", self.source.as_str());
        set(&o, "architecture", format!("{:?}", c.architecture));
        set(&o, "layers", c.num_layers as f64);
        set(&o, "hidden", c.hidden_size as f64);
        set(&o, "vocab", c.vocab_size as f64);
        set(&o, "maxLen", self.max_len as f64);
        set(&o, "maxSeqs", rc.max_seqs as f64);
        set(&o, "maxBatchedTokens", rc.max_tokens as f64);
        set(&o, "kvBlocks", rc.num_blocks as f64);
        set(&o, "hasChatTemplate", self.chat_template.is_some());
        o
    }

    /// Token ids of `text`.
    pub fn tokenize(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, JsValue> {
        self.tokenizer.encode(text, add_special_tokens).map_err(err)
    }

    pub fn decode(&self, ids: Vec<u32>, skip_special_tokens: bool) -> Result<String, JsValue> {
        self.tokenizer
            .decode(&ids, skip_special_tokens)
            .map_err(err)
    }

    /// Renders `[{role, content}, ...]` (as JSON text) with the model's chat template and the
    /// assistant prompt; `null` if the model has none.
    pub fn chat_prompt(&self, messages_json: &str) -> Result<Option<String>, JsValue> {
        let Some(t) = &self.chat_template else {
            return Ok(None);
        };
        let messages: Vec<ChatMessage> = serde_json::from_str(messages_json).map_err(err)?;
        t.render(&messages, true).map(Some).map_err(err)
    }

    /// The tokens of a chat (`[{role, content}, ...]` as JSON) ready for generation: the chat
    /// template when the model has one, else the last message's text with special tokens.
    pub fn chat_tokens(&self, messages_json: &str) -> Result<Vec<u32>, JsValue> {
        match self.chat_prompt(messages_json)? {
            Some(text) => self.tokenize(&text, false),
            None => {
                let messages: Vec<ChatMessage> =
                    serde_json::from_str(messages_json).map_err(err)?;
                let last = messages.last().map(|m| m.content.as_str()).unwrap_or("");
                self.tokenize(last, true)
            }
        }
    }

    /// Starts a generation of `prompt` (token ids) and returns its id. `params`:
    /// `{temperature, top_p, top_k, min_p, repetition_penalty, seed, max_tokens, ignore_eos}`
    /// (temperature 0 is greedy). `on_token(event)` is called for every new token and once
    /// at the end (`event.finished` set). It starts at the next `step()`.
    pub fn start(
        &mut self,
        prompt: Vec<u32>,
        params: JsValue,
        on_token: Option<Function>,
    ) -> Result<f64, JsValue> {
        if prompt.is_empty() {
            return Err(err("the prompt is empty"));
        }
        if prompt.len() >= self.max_len {
            return Err(err(format!(
                "the prompt has {} tokens; the context holds {}",
                prompt.len(),
                self.max_len
            )));
        }
        if let Some(&bad) = prompt
            .iter()
            .find(|&&t| t as usize >= self.config.vocab_size)
        {
            return Err(err(format!("token id {bad} is outside the vocabulary")));
        }
        let d = SamplingParams::default();
        let sampling = SamplingParams {
            temperature: num(&params, "temperature")?.map_or(d.temperature, |v| v as f32),
            top_p: num(&params, "top_p")?.map_or(d.top_p, |v| v as f32),
            top_k: num(&params, "top_k")?.map_or(d.top_k, |v| v as u32),
            min_p: num(&params, "min_p")?.map_or(d.min_p, |v| v as f32),
            repetition_penalty: num(&params, "repetition_penalty")?
                .map_or(d.repetition_penalty, |v| v as f32),
            ..d
        };
        sampling.validate().map_err(err)?;
        let seed = match num(&params, "seed")? {
            Some(s) => s as u64,
            None => (js_sys::Math::random() * 9007199254740991.0) as u64,
        };
        let max_tokens = (num(&params, "max_tokens")?.unwrap_or(256.0).max(1.0) as usize)
            .min(self.max_len - prompt.len());
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            sampling,
            seed,
            ignore_eos: flag(&params, "ignore_eos")?,
            eos_token_ids: self.config.eos_token_ids.clone(),
            ..Request::new(id, prompt, max_tokens)
        };
        let chat = Chat {
            decoder: IncrementalDecoder::new(true),
            callback: on_token,
            num_tokens: 0,
        };
        self.pending
            .borrow_mut()
            .push_back(Command::Start(Box::new((request, chat))));
        Ok(id as f64)
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

    /// Runs one step (one forward pass for every active generation) and resolves to the array
    /// of its events. Rejects if a step is already in flight or the GPU fails.
    // The RefCell borrow held across the step's await is the guard against a second step
    // starting meanwhile (the page is single-threaded; `try_borrow_mut` refuses it).
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn step(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        let pending = self.pending.clone();
        let tokenizer = self.tokenizer.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let events = {
                let Ok(mut guard) = inner.try_borrow_mut() else {
                    return Err(err("a step is already running; await it before the next"));
                };
                let Inner { engine, chats } = &mut *guard;
                let mut events = Vec::new();
                let commands: Vec<Command> = pending.borrow_mut().drain(..).collect();
                for c in commands {
                    match c {
                        Command::Start(start) => {
                            let (request, chat) = *start;
                            let id = request.id;
                            match engine.add_request(request) {
                                Ok(()) => {
                                    chats.insert(id, chat);
                                }
                                Err(e) => events.push(Event {
                                    id,
                                    token_id: None,
                                    text: String::new(),
                                    finished: Some(format!("error: {e}")),
                                    num_tokens: 0,
                                    callback: chat.callback,
                                }),
                            }
                        }
                        Command::Stop(id) => {
                            if let Some(u) = engine.abort(id) {
                                handle(u, chats, &tokenizer, &mut events);
                            }
                        }
                    }
                }
                let updates = engine.step().await;
                let updates = match updates {
                    Ok(u) => u,
                    Err(e) => {
                        let lost = DEVICE_LOST.lock().unwrap().clone();
                        return Err(err(match lost {
                            Some(l) => format!("the GPU device was lost ({l}): {e}"),
                            None => format!("step failed: {e}"),
                        }));
                    }
                };
                if let Some(e) = GPU_ERROR.lock().unwrap().clone() {
                    return Err(err(format!("GPU error: {e}")));
                }
                for u in updates {
                    handle(u, chats, &tokenizer, &mut events);
                }
                events
            };
            // The engine is released: callbacks may call start/stop.
            let out = Array::new();
            for e in &events {
                let obj = e.to_js();
                if let Some(f) = &e.callback
                    && let Err(x) = f.call1(&JsValue::NULL, &obj)
                {
                    web_log(&format!("on_token callback threw: {x:?}"));
                }
                out.push(&obj);
            }
            Ok(out.into())
        })
    }
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(s: &str);
}

fn web_log(s: &str) {
    #[cfg(target_arch = "wasm32")]
    console_warn(s);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{s}");
}

fn handle(
    u: RequestUpdate,
    chats: &mut HashMap<u64, Chat>,
    tokenizer: &Tokenizer,
    events: &mut Vec<Event>,
) {
    let Some(chat) = chats.get_mut(&u.id) else {
        return;
    };
    let token_id = u.token.as_ref().map(|t| t.token_id);
    if token_id.is_none() && u.finished.is_none() {
        return;
    }
    let mut text = String::new();
    if let Some(t) = token_id {
        chat.num_tokens += 1;
        text = chat.decoder.push(tokenizer, t).unwrap_or_default();
    }
    if u.finished.is_some() {
        text.push_str(&chat.decoder.flush(tokenizer).unwrap_or_default());
    }
    let (num_tokens, callback) = (chat.num_tokens, chat.callback.clone());
    if u.finished.is_some() {
        chats.remove(&u.id);
    }
    events.push(Event {
        id: u.id,
        token_id,
        text,
        finished: u.finished.map(|f| finish_name(f).to_string()),
        num_tokens,
        callback,
    });
}
