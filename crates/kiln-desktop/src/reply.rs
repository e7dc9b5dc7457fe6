//! One reply being generated: its request in the engine, its text as it streams (decoded
//! incrementally, cut at stop strings and its reasoning set apart by the shared front end),
//! and its timings. The window
//! polls it each frame; several replies (one per chat) run at once and share the engine's
//! forward passes.

use std::time::Instant;

use kiln_engine::FinishReason;
use kiln_frontend::{ChatExtras, Ending, ReasoningFormat, ReasoningStream, Split, TextStream};
use kiln_model::ChatMessage;
use kiln_server::SeqEvent;

use crate::model::{Loaded, Wake};
use crate::store::{Chat, ReplyStats};

/// Tokens a reply may take when the chat sets no limit (the context permitting).
pub const DEFAULT_MAX_TOKENS: usize = 2048;

pub struct Generation {
    id: u64,
    updates: flume::Receiver<SeqEvent>,
    stream: TextStream,
    split: ReasoningStream,
    started: Instant,
    first: Option<Instant>,
    prompt_tokens: usize,
    cached_tokens: usize,
    generated: usize,
    /// Earlier messages left out of the prompt to fit the context.
    left_out: usize,
}

/// What a poll found.
#[derive(Debug, PartialEq)]
pub enum Poll {
    /// More text: reasoning and answer (possibly none yet).
    Text(Split),
    /// The last text and how the reply went.
    Done(Split, ReplyStats),
    /// The engine failed the request.
    Failed(String),
}

/// Forwards a request's events and wakes the window after each, so it draws when text
/// arrives and not otherwise. Ends when either side is gone (a dropped reply drops the
/// engine's receiver, which aborts the request).
fn relay(events: flume::Receiver<SeqEvent>, wake: Wake) -> flume::Receiver<SeqEvent> {
    let (tx, rx) = flume::unbounded();
    std::thread::Builder::new()
        .name("kiln-reply".into())
        .spawn(move || {
            for e in events.iter() {
                if tx.send(e).is_err() {
                    break;
                }
                wake();
            }
            wake();
        })
        .expect("a thread starts");
    rx
}

impl Generation {
    /// Queues the reply to `chat`'s messages; an error (a bad setting, a latest message
    /// longer than the context) is for the user to read. A conversation too long for the
    /// context leaves its oldest exchanges out of the prompt (the chat keeps them), keeping
    /// room for the reply: the chat's max tokens, or up to a quarter of the context.
    /// `continuing`: the chat's last message is a reply that this one goes on writing.
    pub fn start(model: &Loaded, chat: &Chat, continuing: bool) -> Result<Generation, String> {
        let f = &model.frontend;
        let mut spec = f.resolve(&chat.sampling, None).map_err(|e| e.to_string())?;
        if let Some(name) = &chat.lora {
            let (adapter, _) = model.engine.lora.find(name).ok_or_else(|| {
                format!(
                    "the chat's LoRA adapter `{name}` is not loaded: load it in the model \
                     panel, or pick none in the chat's settings"
                )
            })?;
            spec.lora = Some(adapter);
        }
        let messages: Vec<ChatMessage> = chat
            .messages
            .iter()
            .map(|m| {
                let mut c = ChatMessage::new(&m.role, &m.text);
                c.reasoning_content = Some(m.reasoning.clone()).filter(|r| !r.is_empty());
                c
            })
            .collect();
        let system = Some(chat.system.as_str()).filter(|s| !s.trim().is_empty());
        let max_len = model.engine.info.max_len;
        let room = spec
            .max_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS.min(max_len / 4));
        let extras = ChatExtras {
            system,
            ending: match continuing {
                true => Ending::ContinueLast,
                false => Ending::NewTurn,
            },
            ..ChatExtras::default()
        };
        let fitted = (f.fit_chat(messages, &extras, max_len, room, chat.context_cut))
            .map_err(|e| e.to_string())?;
        let prompt = fitted.prompt;
        let max_tokens = f
            .check_prompt(
                &prompt,
                model.engine.info.max_len,
                spec.max_tokens,
                Some(DEFAULT_MAX_TOKENS),
            )
            .map_err(|e| e.to_string())?;
        let id = model.engine.next_id();
        let seed = spec.seed.unwrap_or_else(rand::random);
        let prompt_tokens = prompt.len();
        let reasoning = ReasoningFormat::detect(f.chat_template.as_ref());
        let opened = reasoning.opened_by_ids(&f.tokenizer, &prompt);
        let split = reasoning.stream(opened);
        // A reply format is a grammar the reply is held to, after any reasoning; a thinking
        // budget bounds the reasoning.
        let format = chat.format.grammar()?;
        let constraint = match reasoning.constrain(format, opened, chat.thinking_budget) {
            Some(g) => Some(
                (model.constraints)
                    .compile(&g, &f.tokenizer, &f.eos_token_ids, f.vocab_size)
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let request = f.request(&spec, id, prompt, max_tokens, seed, 0);
        let updates = relay(model.engine.add(request, constraint), model.wake.clone());
        Ok(Generation {
            id,
            updates,
            stream: spec.text_stream(),
            split,
            started: Instant::now(),
            first: None,
            prompt_tokens,
            cached_tokens: 0,
            generated: 0,
            left_out: fitted.dropped,
        })
    }

    /// Messages its prompt left out to fit the context (the chat's cut from now on).
    pub fn left_out(&self) -> usize {
        self.left_out
    }

    /// Takes what has arrived, without waiting.
    pub fn poll(&mut self, model: &Loaded) -> Poll {
        let mut text = Split::default();
        while let Ok(event) = self.updates.try_recv() {
            let u = match event {
                SeqEvent::Update(u) => u,
                SeqEvent::Rejected(e) | SeqEvent::Error(e) => return Poll::Failed(e),
            };
            self.cached_tokens = u.num_cached_tokens;
            let token = u.token.as_ref().map(|t| t.token_id);
            if token.is_some() {
                self.generated += 1;
                self.first.get_or_insert_with(Instant::now);
            }
            let last = u.finished.is_some();
            let piece = match self.stream.update(&model.frontend.tokenizer, &u) {
                Ok(p) => p,
                Err(e) => return Poll::Failed(e.to_string()),
            };
            let s = self.split.push(&piece.text, last || piece.stopped);
            text.reasoning += &s.reasoning;
            text.content += &s.content;
            if piece.stopped {
                model.engine.abort(self.id);
                return Poll::Done(text, self.stats("stop"));
            }
            if let Some(f) = u.finished {
                let end = if f == FinishReason::Length {
                    "length"
                } else {
                    "stop"
                };
                return Poll::Done(text, self.stats(end));
            }
        }
        if self.updates.is_disconnected() && self.updates.is_empty() {
            return Poll::Failed("the engine stopped".into());
        }
        Poll::Text(text)
    }

    /// Stops the reply (its KV blocks are freed); returns how it went.
    pub fn stop(self, model: &Loaded) -> ReplyStats {
        model.engine.abort(self.id);
        self.stats("stopped")
    }

    fn stats(&self, end: &str) -> ReplyStats {
        let now = Instant::now();
        let first = self.first.unwrap_or(now);
        ReplyStats {
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            generated: self.generated,
            ttft_s: (first - self.started).as_secs_f64(),
            decode_s: (now - first).as_secs_f64(),
            end: end.into(),
            left_out: self.left_out,
        }
    }
}
