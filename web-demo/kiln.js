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

/// Fetches a URL as bytes, reporting progress(doneBytes, totalBytes).
export async function fetchBytes(url, progress) {
  const resp = await fetch(url);
  if (!resp.ok) throw new KilnError(`${url}: HTTP ${resp.status}`);
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

/// Loads a model: `{gguf: Uint8Array, name}` or `{files: {name: Uint8Array}}`.
/// `options`: `{kvMiB, maxSeqs, kernels: 'auto'|'gpu'|'cpu', kvDtype: 'f16'|'f32',
/// speculativeTokens}` (`speculativeTokens`: guesses of each decode's next tokens from its
/// own history, speculative decoding by prompt lookup; 0 or absent: off).
export function loadModel(gpu, src, options = {}, progress = null) {
  const opts = { kvMiB: options.kvMiB ?? 128, maxSeqs: options.maxSeqs ?? 8, kernels: options.kernels, kvDtype: options.kvDtype,
    speculativeTokens: options.speculativeTokens ?? 0 };
  if (src.gguf) return WebEngine.load_gguf(gpu, src.gguf, src.name ?? 'model.gguf', opts, progress);
  return WebEngine.load_hf(gpu, src.files, opts, progress);
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
