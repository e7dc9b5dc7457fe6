// The demo page. The engine runs in a dedicated worker (worker.js, through
// worker-client.js), so tokenizing, scheduling and recording the GPU's work never hold the
// page's frames; the page fetches (and keeps) model files and draws the chats.
import { fetchModelFile, keptModels, forgetModels, canKeepModels, KilnError } from './kiln.js';
import { WorkerEngine } from './worker-client.js';
import { DEMO_TOOLS, runTool } from './tools.js';

/// Replies one message may take while the model calls tools, results fed back each time.
const MAX_TOOL_ROUNDS = 4;

const $ = (id) => document.getElementById(id);
let worker = null, loaded = false;
const chats = [];

function setStatus(el, text, error = false) {
  el.textContent = text;
  el.classList.toggle('error', error);
}

/// The generation fields of `start()` from the sampling panel (the server's names); throws on
/// an output spec that is not what its kind needs.
function samplingParams() {
  const seed = $('seed').value.trim();
  const stop = $('stop').value.split('\n').filter((s) => s !== '');
  const params = {
    temperature: Number($('temperature').value),
    top_p: Number($('top_p').value),
    top_k: Number($('top_k').value),
    min_p: Number($('min_p').value),
    repetition_penalty: Number($('repetition_penalty').value),
    presence_penalty: Number($('presence_penalty').value),
    frequency_penalty: Number($('frequency_penalty').value),
    max_tokens: Number($('max_tokens').value),
    ...(seed === '' ? {} : { seed: Number(seed) }),
    ...(stop.length ? { stop } : {}),
    ...($('lora').value ? { lora: $('lora').value } : {}),
  };
  const spec = $('output-spec').value.trim();
  switch ($('output-kind').value) {
    case 'json_object': params.response_format = { type: 'json_object' }; break;
    case 'json_schema':
      params.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: JSON.parse(spec || '{}') } };
      break;
    case 'regex': params.structured_outputs = { regex: spec }; break;
    case 'choice': params.structured_outputs = { choice: spec.split('\n').filter((s) => s !== '') }; break;
  }
  return params;
}

function fatal(msg) {
  setStatus($('gpu-status'), msg, true);
  // A lost device cannot be reused: offer a reload, which opens a fresh one.
  const reload = document.createElement('button');
  reload.id = 'reload';
  reload.textContent = 'Reload the page';
  reload.addEventListener('click', () => location.reload());
  $('gpu-status').append(' ', reload);
  for (const c of chats) c.setBusy(false, true);
}

class Chat {
  constructor(title) {
    const node = $('chat-template').content.firstElementChild.cloneNode(true);
    node.querySelector('h2').textContent = title;
    $('chats').append(node);
    this.log = node.querySelector('.log');
    this.stats = node.querySelector('.stats');
    this.input = node.querySelector('textarea');
    this.sendBtn = node.querySelector('.send');
    this.stopBtn = node.querySelector('.stop');
    this.messages = [];
    // Messages the prompt leaves out to fit the context (kept while the rest fits).
    this.cut = 0;
    this.id = null;
    node.querySelector('form').addEventListener('submit', (e) => { e.preventDefault(); this.send(); });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); this.send(); }
    });
    // `id` is 'starting' until the worker has answered with the generation's number.
    this.stopBtn.addEventListener('click', () => { if (typeof this.id === 'number') worker.stop(this.id); });
    node.querySelector('.clear').addEventListener('click', () => {
      if (this.id !== null) return;
      this.messages = []; this.cut = 0; this.log.textContent = '';
    });
  }

  addMessage(role, text) {
    const div = document.createElement('div');
    div.className = `msg ${role}`;
    div.textContent = text;
    this.log.append(div);
    this.log.scrollTop = this.log.scrollHeight;
    return div;
  }

  setBusy(busy, disabled = false) {
    this.sendBtn.disabled = busy || disabled || !loaded;
    this.stopBtn.disabled = !busy || disabled;
  }

  async send() {
    const text = this.input.value.trim();
    if (!text || !loaded || this.id !== null) return;
    this.input.value = '';
    this.messages.push({ role: 'user', content: text });
    this.addMessage('user', text);
    // Busy from here: the engine answers asynchronously.
    this.id = 'starting';
    this.setBusy(true);
    const choice = $('tool-choice').value;
    if (choice !== 'off') return this.sendWithTools(choice);
    // A chat longer than the context leaves its oldest exchanges out of the prompt.
    let prompt, leftOut;
    try {
      const asked = samplingParams().max_tokens;
      const room = asked > 0 ? asked : null;
      ({ tokens: prompt, leftOut } = await worker.fit_chat(JSON.stringify(this.messages), room, this.cut));
      this.cut = leftOut;
    } catch (e) {
      this.id = null;
      this.setBusy(false);
      this.messages.pop();
      this.addMessage('system', `error: ${e.message ?? e}`);
      return;
    }
    const out = this.addMessage('assistant', '');
    let reply = '', reasoning = '';
    let thinking = null; // the folded "Thinking" block, once the reply reasons
    const showReasoning = (text) => {
      if (!thinking) {
        thinking = document.createElement('details');
        thinking.className = 'msg thinking';
        const summary = document.createElement('summary');
        summary.textContent = 'Thinking';
        thinking.append(summary, document.createElement('div'));
        out.before(thinking);
      }
      reasoning += text;
      thinking.lastChild.textContent = reasoning;
    };
    const t0 = performance.now();
    let tFirst = null, n = 0;
    const onToken = (ev) => {
      const now = performance.now();
      if (ev.tokenId !== null) {
        n++;
        if (tFirst === null) tFirst = now;
      }
      if (ev.reasoning) showReasoning(ev.reasoning);
      reply += ev.text;
      out.textContent = reply;
      this.log.scrollTop = this.log.scrollHeight;
      const ttft = tFirst === null ? '–' : `${(tFirst - t0).toFixed(0)} ms`;
      const rate = n > 1 ? ((n - 1) / ((now - tFirst) / 1000)).toFixed(1) : '–';
      const dropped = leftOut ? ` (${leftOut} earlier messages left out to fit the context)` : '';
      const line = `TTFT ${ttft} · ${rate} tok/s · ${n} tokens · prompt ${prompt.length} tokens${dropped}`;
      this.stats.textContent = line;
      if (ev.finished) this.finish(line, reply, reasoning, ev.finished);
    };
    try {
      this.id = await worker.start(prompt, samplingParams(), onToken);
    } catch (e) {
      this.id = null;
      this.setBusy(false);
      out.remove();
      this.messages.pop();
      this.addMessage('system', `error: ${e.message ?? e}`);
    }
  }

  /// The reply with the page's tools offered (`choice`: `auto`, or `required` for the first
  /// reply): each call the reply makes is run in the page and its result added to the chat,
  /// which goes on until a reply calls nothing (at most MAX_TOOL_ROUNDS replies). The whole
  /// chat is the prompt (not fitted to the context: a chat too long for it is an error).
  async sendWithTools(choice) {
    const t0 = performance.now();
    let n = 0, tFirst = null, line = '';
    for (let round = 0; round < MAX_TOOL_ROUNDS; round++) {
      const params = { ...samplingParams(), tools: DEMO_TOOLS, tool_choice: round === 0 ? choice : 'auto' };
      const out = this.addMessage('assistant', '');
      let shown = '', promptTokens = 0;
      const ev = await new Promise((resolve, reject) => {
        const onEvent = (ev) => {
          if (ev.tokenId !== null) { n++; tFirst ??= performance.now(); }
          promptTokens = ev.promptTokens ?? promptTokens;
          for (const d of ev.deltas ?? []) {
            if (d.content) shown += d.content;
            for (const c of d.tool_calls ?? []) if (c.function?.name) shown += `[calling ${c.function.name}]`;
          }
          out.textContent = shown;
          this.log.scrollTop = this.log.scrollHeight;
          const rate = n > 1 ? ((n - 1) / ((performance.now() - tFirst) / 1000)).toFixed(1) : '–';
          line = `TTFT ${tFirst === null ? '–' : `${(tFirst - t0).toFixed(0)} ms`} · ${rate} tok/s · ${n} tokens · prompt ${promptTokens} tokens · tool round ${round + 1}`;
          this.stats.textContent = line;
          if (ev.finished) resolve(ev);
        };
        worker.start_chat(JSON.stringify(this.messages), params, onEvent)
          .then((id) => { this.id = id; }, reject);
      }).catch((e) => {
        out.remove();
        this.addMessage('system', `error: ${e.message ?? e}`);
        return null;
      });
      if (!ev) {
        if (round === 0) this.messages.pop();
        this.id = null;
        this.setBusy(false);
        return;
      }
      const reply = ev.reply ?? { content: shown, tool_calls: [], finish_reason: ev.finished };
      const calls = reply.tool_calls ?? [];
      out.textContent = reply.content ?? '';
      if (!reply.content) out.remove();
      this.messages.push({ role: 'assistant', content: reply.content, ...(calls.length ? { tool_calls: calls } : {}) });
      if (calls.length === 0 || ev.finished === 'abort') {
        return this.finish(line, null, '', reply.finish_reason ?? ev.finished);
      }
      for (const c of calls) {
        const result = runTool(c.function.name, c.function.arguments);
        this.addMessage('tool', `${c.function.name}(${c.function.arguments}) → ${result}`);
        this.messages.push({ role: 'tool', tool_call_id: c.id, content: result });
      }
    }
    this.addMessage('system', `stopped after ${MAX_TOOL_ROUNDS} replies that called tools`);
    this.finish(line, null, '', 'tool_calls');
  }

  /// Ends a reply: the engine's guess counts (when it guesses) and how it finished. `reply`
  /// (with its `reasoning`) is added to the chat; `null` when the chat has it already.
  async finish(line, reply, reasoning, finished) {
    const turn = { role: 'assistant', content: reply };
    if (reasoning) turn.reasoning_content = reasoning;
    if (reply !== null) this.messages.push(turn);
    const info = await worker.info().catch(() => null);
    const guesses = info?.guessesMade > 0
      ? ` · guesses ${info.guessesConfirmed} of ${info.guessesMade} confirmed (all chats)` : '';
    this.stats.textContent = `${line}${guesses} · finished: ${finished}`;
    this.id = null;
    this.setBusy(false);
  }
}

async function installModel(src, sizeNote) {
  const status = $('model-status');
  if (chats.some((c) => c.id !== null)) { setStatus(status, 'Wait for the running chats to finish.', true); return; }
  setStatus(status, `Uploading ${src.name ?? 'model'} to the GPU…`);
  try {
    const t0 = performance.now();
    // The engine refuses a count that is not a whole number (its error shows here).
    const speculativeTokens = Number($('spec-tokens').value);
    loaded = false;
    for (const c of chats) c.setBusy(false);
    const loraSlots = Number($('lora-slots').value);
    const info = await worker.load(src, { kvMiB: Number($('kv-mib').value), kvDtype: $('kv-dtype').value, maxSeqs: 8, speculativeTokens,
      ...(loraSlots ? { loraSlots } : {}) },
      (done, total) => { $('progress-bar').style.width = `${(100 * done / total).toFixed(1)}%`; });
    loaded = true;
    await showAdapters();
    setStatus(status, `Loaded ${info.source}${sizeNote}: ${info.architecture}, ${info.layers} layers, hidden ${info.hidden}, ` +
      `vocab ${info.vocab}, context ${info.maxLen}, ${info.kvBlocks} KV blocks of ${info.kvDtype} ` +
      `(${((performance.now() - t0) / 1000).toFixed(1)} s)${info.hasChatTemplate ? '' : ' — no chat template: ChatML is used'}`);
    for (const c of chats) { c.messages = []; c.log.textContent = ''; c.setBusy(false); }
  } catch (e) {
    setStatus(status, `Loading failed: ${e.message ?? e}`, true);
  }
}

async function loadFromUrl() {
  const url = $('model-url').value.trim();
  const status = $('model-status');
  const keep = $('keep-models').checked;
  try {
    let src;
    const progress = (d, t) => {
      $('progress-bar').style.width = t ? `${(100 * d / t).toFixed(1)}%` : '0';
      setStatus(status, `Reading ${url}: ${(d / 2 ** 20).toFixed(1)} MiB`);
    };
    // Where the files came from: all from this browser's store, or downloaded (and kept?).
    const fetched = [];
    const file = async (u, p) => {
      const f = await fetchModelFile(u, p, keep);
      fetched.push(f);
      return f.bytes;
    };
    if (url.endsWith('/')) {
      const files = {};
      files['config.json'] = await file(url + 'config.json', progress);
      // SentencePiece's tokenizer.model where a folder has no tokenizer.json.
      try {
        files['tokenizer.json'] = await file(url + 'tokenizer.json', progress);
      } catch (e) {
        if (!`${e.message}`.endsWith('HTTP 404')) throw e;
        files['tokenizer.model'] = await file(url + 'tokenizer.model', progress);
      }
      for (const f of ['tokenizer_config.json', 'chat_template.jinja', 'chat_template.json',
        'generation_config.json']) {
        try { files[f] = await file(url + f); } catch { /* optional */ }
      }
      // The weights: one file, or an index and the shards it names (a larger model as
      // transformers saves it).
      let index = null;
      try {
        index = await file(url + 'model.safetensors.index.json');
      } catch (e) {
        if (!`${e.message}`.endsWith('HTTP 404')) throw e; // no index: one file
      }
      if (index) {
        files['model.safetensors.index.json'] = index;
        const map = JSON.parse(new TextDecoder().decode(index)).weight_map ?? {};
        for (const shard of new Set(Object.values(map))) {
          if (typeof shard !== 'string' || shard.includes('/') || shard.startsWith('.')) {
            throw new Error(`model.safetensors.index.json names a shard outside the folder: ${shard}`);
          }
          files[shard] = await file(url + shard, progress);
        }
      } else {
        files['model.safetensors'] = await file(url + 'model.safetensors', progress);
      }
      src = { files, name: url };
    } else {
      src = { gguf: await file(url, progress), name: url.split('/').pop() };
    }
    let origin = '';
    if (fetched.every((f) => f.fromCache)) origin = " (from this browser's store, not downloaded)";
    else if (keep && fetched.every((f) => f.kept)) origin = ' (downloaded, kept in this browser)';
    else if (keep) origin = ` (downloaded, not kept: ${fetched.find((f) => f.note)?.note || 'this page cannot keep files'})`;
    await installModel(src, origin);
    await showKept();
  } catch (e) {
    setStatus(status, `Loading ${url} failed: ${e.message ?? e}`, true);
  }
}

/// Lists the model files this browser keeps next to the "Forget kept models" button.
async function showKept() {
  const kept = canKeepModels() ? await keptModels() : null;
  $('kept-models').textContent = kept === null ? 'this page cannot keep files (not a secure context)'
    : kept.length ? `kept: ${kept.map((u) => decodeURIComponent(u.split('/').pop())).join(', ')}` : 'none kept';
  $('forget-models').disabled = !kept?.length;
}

/// The loaded model's LoRA adapters in the sampling panel's list (the one picked kept while
/// it is loaded), and what the model panel says of them.
async function showAdapters(note = '') {
  const info = await worker.info();
  const select = $('lora');
  const picked = select.value;
  select.replaceChildren(new Option('none', ''), ...info.loras.map((n) => new Option(n, n)));
  select.value = info.loras.includes(picked) ? picked : '';
  $('unload-lora').disabled = select.value === '';
  setStatus($('lora-status'), info.loraSlots || info.loras.length
    ? `${note}adapters: ${info.loras.join(', ') || 'none'} (${info.loraSlots} slots)` : '');
}

/// Loads a GGUF adapter file picked on disk, named after the file.
async function loadAdapter(file) {
  await loadPicked(file.name.replace(/\.gguf$/, ''), async () => ({ gguf: new Uint8Array(await file.arrayBuffer()) }));
}

/// Loads a PEFT folder picked on disk (its `adapter_config.json` and
/// `adapter_model.safetensors`), named after the folder.
async function loadAdapterFolder(files) {
  const byName = new Map(Array.from(files, (f) => [f.name, f]));
  const config = byName.get('adapter_config.json');
  const weights = byName.get('adapter_model.safetensors');
  const folder = (files[0]?.webkitRelativePath ?? '').split('/')[0];
  await loadPicked(folder || 'peft', async () => {
    if (!config || !weights) throw new Error('the folder needs adapter_config.json and adapter_model.safetensors');
    return { config: await config.text(), safetensors: new Uint8Array(await weights.arrayBuffer()) };
  });
}

/// Loads the adapter `read` gives (its fields but the name) as `name`, and picks it for replies.
async function loadPicked(name, read) {
  try {
    await worker.load_lora({ name, ...(await read()) });
    $('lora').value = '';
    await showAdapters(`loaded ${name} · `);
    $('lora').value = name;
    $('unload-lora').disabled = false;
  } catch (e) {
    setStatus($('lora-status'), `Loading the adapter failed: ${e.message ?? e}`, true);
  }
}

async function loadFromDisk(fileList) {
  const files = [...fileList];
  const gguf = files.find((f) => f.name.endsWith('.gguf'));
  if (gguf) {
    await installModel({ gguf: new Uint8Array(await gguf.arrayBuffer()), name: gguf.name }, '');
    return;
  }
  const map = {};
  for (const f of files) map[f.name] = new Uint8Array(await f.arrayBuffer());
  await installModel({ files: map, name: files.map((f) => f.name).join(', ') }, '');
}

async function main() {
  chats.push(new Chat('Chat A'), new Chat('Chat B'));
  try {
    worker = await WorkerEngine.create({ defaultLimits: new URLSearchParams(location.search).has('default-limits') });
  } catch (e) {
    setStatus($('gpu-status'), e instanceof KilnError ? e.message : `${e}`, true);
    $('load-url').disabled = true;
    return;
  }
  worker.onFatal = fatal;
  const gpu = worker.gpu;
  $('default-limits').checked = new URLSearchParams(location.search).has('default-limits');
  $('default-limits').addEventListener('change', (e) => {
    const q = e.target.checked ? '?default-limits' : '';
    location.search = q;
  });
  const lim = gpu.limits.device;
  setStatus($('gpu-status'), `Adapter: ${gpu.adapter} (in a worker) · storage binding ${(lim.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB · ` +
    `${lim.maxComputeInvocationsPerWorkgroup} invocations/workgroup · ${(lim.maxComputeWorkgroupStorageSize / 1024).toFixed(0)} KiB workgroup storage`);
  const feats = gpu.adapterFeatures;
  $('gpu-features').textContent = `Adapter features: ${feats.length ? feats.join(', ') : '(none)'} · ` +
    `kiln uses: ${gpu.deviceFeatures.join(', ') || 'no optional features'}`;
  $('load-url').addEventListener('click', loadFromUrl);
  $('forget-models').addEventListener('click', async () => { await forgetModels(); await showKept(); });
  await showKept();
  $('model-files').addEventListener('change', (e) => loadFromDisk(e.target.files));
  $('lora-file').addEventListener('change', (e) => { if (e.target.files[0]) loadAdapter(e.target.files[0]); });
  $('lora-folder').addEventListener('change', (e) => { if (e.target.files.length) loadAdapterFolder(e.target.files); });
  $('lora').addEventListener('change', () => { $('unload-lora').disabled = $('lora').value === ''; });
  $('unload-lora').addEventListener('click', async () => {
    const name = $('lora').value;
    try {
      await worker.unload_lora(name);
      await showAdapters(`unloaded ${name} · `);
    } catch (e) {
      setStatus($('lora-status'), `Unloading failed: ${e.message ?? e}`, true);
    }
  });
}

main();
