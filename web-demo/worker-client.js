// The page's side of worker.js: a kiln engine running in a dedicated worker, with the calls
// of the engine itself (answered asynchronously) and a driver-like handle, so openai.js's
// client works over it as over an engine on the page's thread.
import { KilnError } from './kiln.js';

export class WorkerEngine {
  /// Starts the worker and opens the GPU in it (`gpuOptions` as kiln.js's `openGpu`).
  static async create(gpuOptions = {}) {
    const w = new WorkerEngine(new Worker(new URL('./worker.js', import.meta.url), { type: 'module' }));
    w.gpu = await w.call('open', { options: gpuOptions });
    return w;
  }

  constructor(worker) {
    this.worker = worker;
    this.calls = new Map();
    this.callbacks = new Map();
    this.serial = 0;
    this.onProgress = null;
    /// Called with the message when the worker's engine fails for good (a lost device).
    this.onFatal = null;
    // What openai.js reads of a driver: kick() (the worker steps by itself) and `dead`.
    this.driver = { kick() {}, dead: null };
    worker.onmessage = ({ data }) => this.receive(data);
    worker.onerror = (e) => this.die(`the engine's worker failed: ${e.message ?? e}`);
  }

  receive(data) {
    if (data.call !== undefined) {
      const { resolve, reject } = this.calls.get(data.call);
      this.calls.delete(data.call);
      if (data.ok) resolve(data.value); else reject(new KilnError(data.error));
    } else if (data.event !== undefined) {
      const cb = this.callbacks.get(data.event);
      if (data.ev.finished) this.callbacks.delete(data.event);
      cb?.(data.ev);
    } else if (data.progress) {
      this.onProgress?.(...data.progress);
    } else if (data.fatal) {
      this.die(data.fatal);
    }
  }

  die(message) {
    if (!this.driver.dead) this.onFatal?.(message);
    this.driver.dead = message;
    for (const { reject } of this.calls.values()) reject(new KilnError(message));
    this.calls.clear();
  }

  /// Asks the worker to run `op` with `args` (the buffers in `transfer` moved, not copied).
  call(op, args = {}, transfer = []) {
    if (this.driver.dead) return Promise.reject(new KilnError(this.driver.dead));
    const call = this.serial++;
    return new Promise((resolve, reject) => {
      this.calls.set(call, { resolve, reject });
      this.worker.postMessage({ call, op, ...args }, transfer);
    });
  }

  /// Loads a model: a GGUF file by URL (fetched and kept by the worker, `keep` as kiln.js's
  /// `fetchModelFile`) or from `gguf` bytes, or a Hugging Face folder's `files` (`{name:
  /// bytes}`), the bytes moved to the worker; resolves to the engine's info with
  /// `fromCache`. `options` as kiln.js's `loadModel`; `progress(done, total)` while the file
  /// is read and uploaded.
  load({ url, gguf, files, name, keep = true }, options = {}, progress = null) {
    this.onProgress = progress;
    const transfer = [gguf, ...Object.values(files ?? {})].filter(Boolean).map((b) => b.buffer);
    return this.call('load', { url, bytes: gguf, files, name, keep, options }, transfer);
  }

  /// The prompt tokens of a chat (`messages` as JSON text, as the engine's `chat_tokens`).
  chat_tokens(messages) { return this.call('chat_tokens', { messages }); }

  /// A chat's prompt fitted to the context with `room` for the reply (as the engine's
  /// `fit_chat`, `kept` the last turn's `leftOut`): `{tokens, leftOut}`.
  fit_chat(messages, room, kept) { return this.call('fit_chat', { messages, room, kept }); }

  info() { return this.call('info'); }

  /// Token ids of `text` (as the engine's `tokenize`).
  tokenize(text, special) { return this.call('tokenize', { text, special }); }

  /// Starts a generation (as the engine's `start`); resolves to its id. `onEvent(ev)` gets
  /// its events.
  async start(prompt, params, onEvent) {
    const id = await this.call('start', { prompt: Array.from(prompt), params });
    this.callbacks.set(id, onEvent);
    return id;
  }

  /// Starts a chat reply (as the engine's `start_chat`, `messages` as JSON text); resolves
  /// to its id. `onEvent(ev)` gets its events.
  async start_chat(messages, params, onEvent) {
    const id = await this.call('start_chat', { messages, params });
    this.callbacks.set(id, onEvent);
    return id;
  }

  /// Starts embedding `input` (token ids; as the engine's `start_embedding`); resolves to
  /// its id. `onEvent(ev)` gets its event.
  async start_embedding(input, onEvent) {
    const id = await this.call('start_embedding', { input: Array.from(input) });
    this.callbacks.set(id, onEvent);
    return id;
  }

  stop(id) { this.call('stop', { id }).catch(() => {}); }

  /// Loads a LoRA adapter while the model runs (as the engine's `load_lora`).
  load_lora(adapter) { return this.call('load_lora', { adapter }); }

  /// Unloads a LoRA adapter (as the engine's `unload_lora`).
  unload_lora(name) { return this.call('unload_lora', { name }); }

  terminate() {
    this.worker.terminate();
    this.die('the engine\'s worker was ended');
  }
}
