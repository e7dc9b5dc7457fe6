// The engine in a dedicated worker: the GPU, the model and the step loop live here, so the
// page's thread only draws (tokenizing, scheduling, recording the GPU's work and reading its
// results never block it). The page talks to it through worker-client.js; each message
// `{call, op, ...}` is answered `{call, ok, value | error}`, and a generation's events come as
// `{event: generation id, ev}`.
import { openGpu, describeAdapter, fetchModelFile, loadModel, Driver } from './kiln.js';

let gpu = null, engine = null, driver = null;

const ops = {
  /// Opens the GPU; the adapter as the page would describe it, its features and limits.
  async open({ options }) {
    gpu = await openGpu(options);
    return {
      adapter: describeAdapter(gpu),
      adapterFeatures: gpu.adapter_features(),
      deviceFeatures: gpu.device_features(),
      limits: gpu.limits(),
    };
  },

  /// Loads a model: a GGUF file fetched here by URL (kept in the browser as kiln.js keeps
  /// it) or given as bytes, or a Hugging Face folder's files (`{name: bytes}`); the engine's
  /// info, with whether the file came from the browser's store.
  async load({ url, bytes, files, name, options, keep }) {
    const progress = (done, total) => postMessage({ progress: [done, total] });
    let fromCache = false;
    if (url !== undefined) {
      ({ bytes, fromCache } = await fetchModelFile(url, progress, keep));
      name ??= url.split('/').pop();
    }
    // The step loop may still be finishing a step (its last events already sent): the
    // engine cannot be freed while that step holds it.
    while (driver?.running) await new Promise((resolve) => setTimeout(resolve, 5));
    engine?.free();
    engine = null;
    engine = loadModel(gpu, files ? { files, name } : { gguf: bytes, name }, options, progress);
    driver = new Driver(gpu, engine, (message) => postMessage({ fatal: message }));
    return { ...engine.info(), fromCache };
  },

  chat_tokens: ({ messages }) => engine.chat_tokens(messages),

  fit_chat: ({ messages, room, kept }) => engine.fit_chat(messages, room, kept),

  tokenize: ({ text, special }) => engine.tokenize(text, special),

  info: () => engine.info(),

  /// Starts a generation; its events follow as `{event: id, ev}` messages, from the next
  /// step on (after this call's answer).
  start({ prompt, params }) {
    const id = engine.start(prompt, params, (ev) => postMessage({ event: id, ev }));
    driver.kick();
    return id;
  },

  /// Starts a chat reply (as the engine's `start_chat`); its events follow as `start`'s.
  start_chat({ messages, params }) {
    const id = engine.start_chat(messages, params, (ev) => postMessage({ event: id, ev }));
    driver.kick();
    return id;
  },

  /// Starts embedding `input` (as the engine's `start_embedding`).
  start_embedding({ input }) {
    const id = engine.start_embedding(input, (ev) => postMessage({ event: id, ev }));
    driver.kick();
    return id;
  },

  stop({ id }) {
    engine.stop(id);
    driver.kick();
  },

  /// Loads a LoRA adapter while the model runs (`loadModel`'s `loraSlots` made room):
  /// `{name, gguf}` or `{name, config, safetensors}`.
  load_lora({ adapter }) {
    engine.load_lora(adapter);
    driver.kick();
  },

  /// Unloads a LoRA adapter (it leaves once no generation runs through it).
  unload_lora({ name }) {
    engine.unload_lora(name);
    driver.kick();
  },
};

onmessage = async ({ data }) => {
  const { call, op } = data;
  try {
    if (op !== 'open' && op !== 'load' && !engine) throw new Error('no model is loaded');
    const value = await ops[op](data);
    postMessage({ call, ok: true, value });
  } catch (e) {
    postMessage({ call, ok: false, error: `${e.message ?? e}` });
  }
};
