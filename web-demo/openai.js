// OpenAI's chat completions over one kiln engine in the page: `client.chat.completions
// .create(params)` answers as the `openai` package's client does against a server (a
// `chat.completion`, or with `stream: true` an async iterable of `chat.completion.chunk`s),
// so code written for a server's API runs on the tab's GPU instead.
import { KilnError } from './kiln.js';

/// A client over `engine` (a loaded WebEngine, or worker-client.js's WorkerEngine, whose
/// calls answer asynchronously) stepped by `driver` (kiln.js's Driver, shared with any other
/// use of the engine, or the WorkerEngine's `driver`); `model` is the name requests may give
/// in `model`.
/// `create(params, {signal})`: `params` takes `messages`, `stream`, `stream_options`
/// (`include_usage`), `model`, `max_completion_tokens` and every field of the engine's
/// `start_chat()`: `start()`'s (`logprobs` and `top_logprobs` among them) and `tools`,
/// `tool_choice` and `parallel_tool_calls` (replies then carry `tool_calls`, whole or as
/// streamed deltas, read by the same code as the server's); an unknown field is an error,
/// never ignored. Aborting `signal` stops
/// the generation, which then rejects (or ends the stream) with an `AbortError`.
export function openaiClient(engine, driver, model) {
  let serial = 0;
  const create = async (params, { signal } = {}) => {
    const { messages, stream = false, stream_options: options, model: asked, ...fields } = params ?? {};
    if (asked !== undefined && asked !== model) {
      throw new KilnError(`model: this page serves \`${model}\`, not \`${asked}\``);
    }
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new KilnError('messages: a non-empty array of {role, content} is required');
    }
    if (options !== undefined && !stream) throw new KilnError('stream_options: only with stream: true');
    const { include_usage: includeUsage = false, ...otherOptions } = options ?? {};
    const unknown = Object.keys(otherOptions)[0];
    if (unknown !== undefined) throw new KilnError(`stream_options: \`${unknown}\` is not served in the page`);
    if (fields.max_completion_tokens !== undefined) {
      if (fields.max_tokens !== undefined) throw new KilnError('give max_tokens or max_completion_tokens, not both');
      fields.max_tokens = fields.max_completion_tokens;
      delete fields.max_completion_tokens;
    }
    signal?.throwIfAborted();
    const head = { id: `chatcmpl-kiln-${Date.now().toString(36)}-${serial++}`, created: Math.floor(Date.now() / 1000), model };
    const events = new EventQueue(driver);
    const id = await engine.start_chat(JSON.stringify(messages), fields, (ev) => events.push(ev));
    const abort = () => { engine.stop(id); driver.kick(); };
    signal?.addEventListener('abort', abort, { once: true });
    driver.kick();
    const usage = (ev) => ({ prompt_tokens: ev.promptTokens, completion_tokens: ev.numTokens, total_tokens: ev.promptTokens + ev.numTokens });
    // Each event's token entry (`start()` checked the fields), as chat's `logprobs.content`.
    const logprobs = (entries) => (fields.logprobs ? { content: entries } : null);
    if (!stream) {
      let content = '', reasoning = '';
      const entries = [];
      for (;;) {
        const ev = await events.next();
        content += ev.text;
        reasoning += ev.reasoning;
        if (ev.logprobs) entries.push(ev.logprobs);
        if (ev.finished) {
          signal?.removeEventListener('abort', abort);
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
      }
    }
    const chunk = (delta, finish = null, lp = null) => ({
      ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, logprobs: lp, finish_reason: finish }],
    });
    return {
      async* [Symbol.asyncIterator]() {
        let finished = false;
        try {
          yield chunk({ role: 'assistant', content: '' });
          // Token entries whose text no chunk has carried yet (held back under tools).
          let unsent = [];
          for (;;) {
            const ev = await events.next();
            if (ev.logprobs) unsent.push(ev.logprobs);
            const take = () => { const lp = unsent.length ? logprobs(unsent) : null; unsent = []; return lp; };
            if (ev.reasoning) yield chunk({ reasoning_content: ev.reasoning });
            // Under tools, the deltas the engine parsed from the answer; else its text.
            const deltas = ev.deltas ?? (ev.text || ev.logprobs ? [{ content: ev.text }] : []);
            for (const delta of deltas) yield chunk(delta, null, take());
            if (ev.finished) {
              finished = true;
              yield chunk({}, finishReason(ev.finished), take());
              if (includeUsage) yield { ...head, object: 'chat.completion.chunk', choices: [], usage: usage(ev) };
              return;
            }
          }
        } finally {
          // A consumer that stops reading early stops the generation too.
          signal?.removeEventListener('abort', abort);
          if (!finished) abort();
        }
      },
    };
  };
  return { chat: { completions: { create } } };
}

/// OpenAI's finish reason for an event's `finished`; throws for an abort or an error.
function finishReason(finished) {
  if (finished === 'stop' || finished === 'length' || finished === 'tool_calls') return finished;
  if (finished === 'abort') throw new DOMException('The generation was aborted', 'AbortError');
  throw new KilnError(finished);
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
