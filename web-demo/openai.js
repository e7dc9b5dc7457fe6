// OpenAI's API over one kiln engine in the page: `client.chat.completions.create(params)`,
// `client.completions.create(params)` and `client.embeddings.create(params)` answer as the
// `openai` package's client does against a server (a `chat.completion` or `text_completion`,
// or with `stream: true` an async iterable of their chunks; a list of embeddings), so code
// written for a server's API runs on the tab's GPU instead.
import { KilnError } from './kiln.js';

/// A client over `engine` (a loaded WebEngine, or worker-client.js's WorkerEngine, whose
/// calls answer asynchronously) stepped by `driver` (kiln.js's Driver, shared with any other
/// use of the engine, or the WorkerEngine's `driver`); `model` is the name requests may give
/// in `model` (or the name of a LoRA adapter loaded with the model, which chat and completions
/// then run through). Each `create(params, {signal})` refuses a field it does not serve by name,
/// never ignoring it; aborting `signal` stops the generation, which then rejects (or ends the
/// stream) with an `AbortError`.
/// - `chat.completions`: `messages`, `stream`, `stream_options` (`include_usage`),
///   `max_completion_tokens` and every field of the engine's `start_chat()`: `start()`'s
///   (`logprobs` and `top_logprobs` among them), `tools`, `tool_choice` and
///   `parallel_tool_calls` (replies then carry `tool_calls`, whole or as streamed deltas, read
///   by the same code as the server's) and `chat_template_kwargs` (the template's variables:
///   Qwen3's `enable_thinking`, Llama 3's `date_string`).
/// - `completions`: `prompt` (one text, or token ids), `stream`, `stream_options` and
///   `start()`'s fields but `logprobs` (completions' own log-probabilities are the server's).
/// - `embeddings`: `input` (a text, token ids, or a list of either), `encoding_format`
///   (`float` or `base64`), `dimensions` (only the model's width): the server's embeddings.
export function openaiClient(engine, driver, model) {
  let serial = 0;
  // The name a request's `model` gives: the served model's (undefined), or a LoRA adapter
  // loaded with it (`loadModel`'s `lora`), which the generation then runs through.
  const checkModel = async (asked) => {
    if (asked === undefined || asked === model) return undefined;
    const { loras = [] } = await engine.info();
    if (loras.includes(asked)) return asked;
    throw new KilnError(`model: this page serves \`${model}\`${loras.length ? ` and the adapters ${loras.join(', ')}` : ''}, not \`${asked}\``);
  };
  const newId = (prefix) => `${prefix}-kiln-${Date.now().toString(36)}-${serial++}`;
  const created = () => Math.floor(Date.now() / 1000);

  const chat = async (params, { signal } = {}) => {
    const { messages, stream = false, stream_options: options, model: asked, ...fields } = params ?? {};
    const lora = await checkModel(asked);
    if (lora) fields.lora = lora;
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new KilnError('messages: a non-empty array of {role, content} is required');
    }
    const includeUsage = streamOptions(options, stream);
    if (fields.max_completion_tokens !== undefined) {
      if (fields.max_tokens !== undefined) throw new KilnError('give max_tokens or max_completion_tokens, not both');
      fields.max_tokens = fields.max_completion_tokens;
      delete fields.max_completion_tokens;
    }
    signal?.throwIfAborted();
    const head = { id: newId('chatcmpl'), created: created(), model: lora ?? model };
    const run = await Run.start(engine, driver, signal, (cb) => engine.start_chat(JSON.stringify(messages), fields, cb));
    // Each event's token entry (`start_chat()` checked the fields), as chat's `logprobs.content`.
    const logprobs = (entries) => (fields.logprobs ? { content: entries } : null);
    if (!stream) {
      let content = '', reasoning = '';
      const entries = [];
      const ev = await run.collect((e) => {
        content += e.text;
        reasoning += e.reasoning;
        if (e.logprobs) entries.push(e.logprobs);
      });
      // Under tools the engine parsed the whole reply into content and calls.
      let finish = finishReason(ev.finished);
      const message = { role: 'assistant', content, ...(reasoning ? { reasoning_content: reasoning } : {}) };
      if (ev.reply) {
        message.content = ev.reply.content;
        if (ev.reply.tool_calls.length > 0) message.tool_calls = ev.reply.tool_calls;
        finish = ev.reply.finish_reason;
      }
      return {
        ...head, object: 'chat.completion',
        choices: [{ index: 0, message, logprobs: logprobs(entries), finish_reason: finish }],
        usage: usage(ev),
      };
    }
    const chunk = (delta, finish = null, lp = null) => ({
      ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, logprobs: lp, finish_reason: finish }],
    });
    return run.chunks(function* (ev, take) {
      if (ev === null) {
        yield chunk({ role: 'assistant', content: '' });
        return;
      }
      if (ev.reasoning) yield chunk({ reasoning_content: ev.reasoning });
      // Under tools, the deltas the engine parsed from the answer; else its text.
      const deltas = ev.deltas ?? (ev.text || ev.logprobs ? [{ content: ev.text }] : []);
      for (const delta of deltas) yield chunk(delta, null, take(logprobs));
      if (ev.finished) {
        yield chunk({}, finishReason(ev.finished), take(logprobs));
        if (includeUsage) yield { ...head, object: 'chat.completion.chunk', choices: [], usage: usage(ev) };
      }
    });
  };

  const completion = async (params, { signal } = {}) => {
    const { prompt, stream = false, stream_options: options, model: asked, ...fields } = params ?? {};
    const lora = await checkModel(asked);
    if (lora) fields.lora = lora;
    const includeUsage = streamOptions(options, stream);
    if (fields.logprobs !== undefined) {
      throw new KilnError("logprobs: completions' log-probabilities are served by kiln's server, not in the page");
    }
    const ids = await promptIds(engine, prompt, 'prompt');
    if (ids.length !== 1) throw new KilnError('prompt: one prompt per call in the page');
    signal?.throwIfAborted();
    const head = { id: newId('cmpl'), created: created(), model: lora ?? model };
    // A completion is the model's text as written: no reasoning set apart.
    const run = await Run.start(engine, driver, signal, (cb) => engine.start(ids[0], { reasoning: 'none', ...fields }, cb));
    const choice = (text, finish) => ({ index: 0, text, logprobs: null, finish_reason: finish });
    if (!stream) {
      let text = '';
      const ev = await run.collect((e) => { text += e.text; });
      return { ...head, object: 'text_completion', choices: [choice(text, finishReason(ev.finished))], usage: usage(ev) };
    }
    return run.chunks(function* (ev) {
      if (ev === null) return;
      const text = ev.text;
      if (text) yield { ...head, object: 'text_completion', choices: [choice(text, null)] };
      if (ev.finished) {
        yield { ...head, object: 'text_completion', choices: [choice('', finishReason(ev.finished))] };
        if (includeUsage) yield { ...head, object: 'text_completion', choices: [], usage: usage(ev) };
      }
    });
  };

  const embedding = async (params, { signal } = {}) => {
    const { input, model: asked, encoding_format: format = 'float', dimensions, ...rest } = params ?? {};
    if (await checkModel(asked)) {
      throw new KilnError("model: embeddings through a LoRA adapter are served by kiln's server, not in the page");
    }
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined) throw new KilnError(`\`${unknown}\` is not an embeddings field served in the page`);
    if (format !== 'float' && format !== 'base64') {
      throw new KilnError(`encoding_format: \`${format}\` is not one of float, base64`);
    }
    const width = (await engine.info()).hidden;
    if (dimensions !== undefined && dimensions !== width) {
      throw new KilnError(`dimensions: this model's embeddings have ${width} dimensions, not ${dimensions}`);
    }
    const ids = await promptIds(engine, input, 'input');
    signal?.throwIfAborted();
    const runs = [];
    for (const one of ids) runs.push(await Run.start(engine, driver, signal, (cb) => engine.start_embedding(one, cb)));
    const data = await Promise.all(runs.map(async (run, index) => {
      let vector = null;
      const ev = await run.collect((e) => { vector = e.embedding ?? vector; });
      if (!vector) {
        finishReason(ev.finished); // an abort or an error
        throw new KilnError(`input ${index}: no embedding came back`);
      }
      return { object: 'embedding', index, embedding: format === 'base64' ? base64(vector) : Array.from(vector) };
    }));
    const tokens = ids.reduce((n, one) => n + one.length, 0);
    return { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } };
  };

  return { chat: { completions: { create: chat } }, completions: { create: completion }, embeddings: { create: embedding } };
}

/// `stream_options`' `include_usage` (only with `stream: true`; other options refused).
function streamOptions(options, stream) {
  if (options !== undefined && !stream) throw new KilnError('stream_options: only with stream: true');
  const { include_usage: includeUsage = false, ...other } = options ?? {};
  const unknown = Object.keys(other)[0];
  if (unknown !== undefined) throw new KilnError(`stream_options: \`${unknown}\` is not served in the page`);
  return includeUsage;
}

/// A prompt or embeddings input as lists of token ids: a text (tokenized as the server does,
/// with the model's special tokens), token ids, or a non-empty list of either.
async function promptIds(engine, value, field) {
  const isIds = (v) => Array.isArray(v) && v.length > 0 && v.every(Number.isInteger);
  let items;
  if (typeof value === 'string' || isIds(value)) items = [value];
  else if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string' || isIds(v))) items = value;
  else throw new KilnError(`${field}: a text, token ids, or a non-empty list of either is required`);
  const out = [];
  for (const v of items) out.push(typeof v === 'string' ? Array.from(await engine.tokenize(v, true)) : v);
  return out;
}

function usage(ev) {
  return { prompt_tokens: ev.promptTokens, completion_tokens: ev.numTokens, total_tokens: ev.promptTokens + ev.numTokens };
}

/// Little-endian f32s in base64, as OpenAI's `encoding_format: "base64"`.
function base64(floats) {
  const bytes = new Uint8Array(Float32Array.from(floats).buffer);
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/// OpenAI's finish reason for an event's `finished`; throws for an abort or an error.
function finishReason(finished) {
  if (finished === 'stop' || finished === 'length' || finished === 'tool_calls') return finished;
  if (finished === 'abort') throw new DOMException('The generation was aborted', 'AbortError');
  throw new KilnError(finished);
}

/// One generation's events, from its start to its finish; aborting `signal` stops it.
class Run {
  /// Starts a generation with `begin(callback)` (which resolves to its id).
  static async start(engine, driver, signal, begin) {
    const run = new Run(engine, driver, signal);
    run.id = await begin((ev) => run.events.push(ev));
    signal?.addEventListener('abort', run.abort, { once: true });
    driver.kick();
    return run;
  }

  constructor(engine, driver, signal) {
    this.events = new EventQueue(driver);
    this.signal = signal;
    this.abort = () => { engine.stop(this.id); driver.kick(); };
  }

  /// Awaits the events, each given to `each`; resolves to the last (finished) one.
  async collect(each) {
    for (;;) {
      const ev = await this.events.next();
      each(ev);
      if (ev.finished) {
        this.signal?.removeEventListener('abort', this.abort);
        return ev;
      }
    }
  }

  /// The stream's chunks: `write(null)`'s first, then `write(ev, take)`'s for each event,
  /// where `take(format)` hands over the log-probability entries no chunk has carried yet.
  /// A consumer that stops reading early stops the generation too.
  chunks(write) {
    const run = this;
    return {
      async* [Symbol.asyncIterator]() {
        let finished = false;
        try {
          yield* write(null);
          // Token entries whose text no chunk has carried yet (held back under tools).
          let unsent = [];
          const take = (format) => { const lp = unsent.length ? format(unsent) : null; unsent = []; return lp; };
          for (;;) {
            const ev = await run.events.next();
            if (ev.logprobs) unsent.push(ev.logprobs);
            finished = !!ev.finished;
            yield* write(ev, take);
            if (finished) return;
          }
        } finally {
          run.signal?.removeEventListener('abort', run.abort);
          if (!finished) run.abort();
        }
      },
    };
  }
}

/// A generation's events, awaited one at a time; rejects once the driver has died.
class EventQueue {
  constructor(driver) {
    this.driver = driver;
    this.items = [];
    this.waiting = null;
  }

  push(ev) {
    this.items.push(ev);
    this.waiting?.();
    this.waiting = null;
  }

  async next() {
    while (this.items.length === 0) {
      if (this.driver.dead) throw new KilnError(this.driver.dead);
      // Woken by the next event, or after a while to look at the driver again.
      await new Promise((resolve) => { this.waiting = resolve; setTimeout(resolve, 100); });
    }
    return this.items.shift();
  }
}
