// Shared by the demo (app.js) and the browser test (test.html): opens WebGPU, loads a model
// into one kiln engine and drives it with a single step loop that every chat shares.
import init, { open_gpu, WebEngine } from './pkg/kiln_web.js';

export class KilnError extends Error {}

/// Opens the GPU; throws a KilnError with a clear message when WebGPU is missing.
export async function openGpu({ defaultLimits = false } = {}) {
  if (!('gpu' in navigator) || !navigator.gpu) {
    throw new KilnError(
      'WebGPU is not available in this browser. Use a recent Chrome/Edge (or Firefox/Safari with WebGPU enabled), ' +
      'served over http://localhost or https.');
  }
  // Ask once from JS too: wgpu only sees the adapter's description, often empty.
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) {
    throw new KilnError('WebGPU is present but no adapter is available ' +
      '(the GPU may be blocklisted or hardware acceleration disabled).');
  }
  const info = adapter.info ?? {};
  await init();
  let gpu;
  try {
    gpu = await open_gpu(defaultLimits);
  } catch (e) {
    throw new KilnError(`Could not open a WebGPU device: ${e.message ?? e}`);
  }
  gpu.jsInfo = { vendor: info.vendor ?? '', architecture: info.architecture ?? '', description: info.description ?? '' };
  return gpu;
}

/// "vendor architecture (description)" as the browser reports the adapter.
export function describeAdapter(gpu) {
  const i = gpu.jsInfo ?? {};
  const parts = [i.vendor, i.architecture].filter(Boolean).join(' ');
  const desc = i.description || gpu.adapter_name;
  return [parts, desc && `(${desc})`].filter(Boolean).join(' ') || 'unnamed WebGPU adapter';
}

/// Fetches a URL as bytes, reporting progress(doneBytes, totalBytes); `init` as fetch's.
export async function fetchBytes(url, progress, init = {}) {
  const resp = await fetch(url, init);
  if (!resp.ok) throw new KilnError(`${url}: HTTP ${resp.status}`);
  return readBody(resp, progress);
}

/// The body of `resp` as bytes, reporting progress(doneBytes, totalBytes).
async function readBody(resp, progress) {
  const total = Number(resp.headers.get('content-length')) || 0;
  if (!resp.body || !progress) return new Uint8Array(await resp.arrayBuffer());
  const reader = resp.body.getReader();
  const chunks = [];
  let done = 0;
  for (;;) {
    const { done: end, value } = await reader.read();
    if (end) break;
    chunks.push(value);
    done += value.length;
    progress(done, total);
  }
  const out = new Uint8Array(done);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out;
}

/// The browser's Cache Storage bucket that keeps downloaded model files.
const MODEL_CACHE = 'kiln-models';

/// Whether this page can keep model files (Cache Storage exists only in secure contexts:
/// https, or http on localhost).
export function canKeepModels() {
  return typeof caches !== 'undefined';
}

/// Fetches a model file by URL as `fetchBytes` does, through the browser's Cache Storage: a
/// URL kept before is read from there (no download); a new one is downloaded and, with
/// `keep`, kept for the next load. Resolves to `{bytes, fromCache, kept, note}`: `kept` says
/// whether this download was kept, `note` why not when keeping failed (the storage quota).
/// A file changed on the server under the same URL is not noticed: `forgetModels()`.
export async function fetchModelFile(url, progress, keep = true) {
  const cache = keep && canKeepModels() ? await caches.open(MODEL_CACHE) : null;
  const hit = await cache?.match(url);
  if (hit) return { bytes: await readBody(hit, progress), fromCache: true, kept: true, note: '' };
  // A file to keep bypasses the HTTP cache: it would be stored twice.
  const bytes = await fetchBytes(url, progress, cache ? { cache: 'no-store' } : {});
  let kept = false, note = '';
  if (cache) {
    const headers = { 'content-type': 'application/octet-stream', 'content-length': `${bytes.length}` };
    try {
      await cache.put(url, new Response(bytes, { headers }));
      kept = true;
    } catch (e) {
      note = `${e.message ?? e}`;
    }
  }
  return { bytes, fromCache: false, kept, note };
}

/// The URLs of the model files this browser keeps.
export async function keptModels() {
  if (!canKeepModels() || !(await caches.has(MODEL_CACHE))) return [];
  const cache = await caches.open(MODEL_CACHE);
  return (await cache.keys()).map((r) => r.url);
}

/// Deletes every kept model file; resolves to whether there were any.
export async function forgetModels() {
  return canKeepModels() && caches.delete(MODEL_CACHE);
}

/// Loads a model: `{gguf: Uint8Array, name}` or `{files: {fileName: Uint8Array}, name}` (a folder).
/// `options`: `{kvMiB, maxSeqs, kernels: 'auto'|'gpu'|'cpu', kvDtype: 'f16'|'f32'|'q8_0'|'fp8',
/// speculativeTokens, lora, loraSlots, loraRank}` (`speculativeTokens`: guesses of each
/// decode's next tokens from its own history, speculative decoding by prompt lookup; 0 or
/// absent: off; `lora`: LoRA adapters, each `{name, gguf: Uint8Array}` or `{name, config:
/// adapter_config.json's text, safetensors: Uint8Array}`, which a generation's `lora`
/// parameter, or openai.js's `model`, names; `loraSlots`: room on the GPU for that many
/// adapters of rank up to `loraRank` (16), so that the engine's `load_lora(adapter)` and
/// `unload_lora(name)` load and unload adapters while it runs). Any other option is refused
/// by name.
export function loadModel(gpu, src, options = {}, progress = null) {
  const known = ['kvMiB', 'maxSeqs', 'kernels', 'kvDtype', 'speculativeTokens', 'lora', 'loraSlots', 'loraRank'];
  const unknown = Object.keys(options).find((k) => !known.includes(k));
  if (unknown !== undefined) throw new KilnError(`${unknown}: not an option of loadModel`);
  const opts = { kvMiB: options.kvMiB ?? 128, maxSeqs: options.maxSeqs ?? 8, kernels: options.kernels, kvDtype: options.kvDtype,
    speculativeTokens: options.speculativeTokens ?? 0, lora: options.lora, loraSlots: options.loraSlots,
    loraRank: options.loraRank };
  if (src.gguf) return WebEngine.load_gguf(gpu, src.gguf, src.name ?? 'model.gguf', opts, progress);
  return WebEngine.load_hf(gpu, src.files, src.name ?? 'model folder', opts, progress);
}

/// One step loop for one engine; every chat calls kick() after start()/stop().
export class Driver {
  constructor(gpu, engine, onFatal) {
    this.gpu = gpu;
    this.engine = engine;
    this.onFatal = onFatal;
    this.running = false;
    this.steps = 0;
    this.dead = null;
  }

  kick() {
    if (this.dead) throw new KilnError(this.dead);
    if (!this.running) this.loop();
  }

  async loop() {
    this.running = true;
    try {
      while (this.engine.has_work()) {
        const events = await this.engine.step();
        this.steps++;
        // Nothing was scheduled: let the page breathe instead of spinning on microtasks.
        if (events.length === 0) await new Promise((r) => setTimeout(r, 0));
        const lost = this.gpu.lost();
        if (lost) throw new KilnError(`The GPU device was lost: ${lost}. Reload the page.`);
      }
    } catch (e) {
      const lost = this.gpu.lost();
      this.dead = lost ? `The GPU device was lost: ${lost}. Reload the page.` : `${e.message ?? e}`;
      this.onFatal?.(this.dead);
    } finally {
      this.running = false;
    }
  }
}
