//! One sequence as the handler task sees it: the engine's token updates come in, and text
//! deltas go out. Detokenization (incremental, whole UTF-8 characters only) and stop-string
//! matching happen here, off the engine thread, so the text of step N-1 is streamed while
//! the GPU runs step N. Dropping an unfinished sequence aborts it in the engine.

use std::time::Instant;

use kiln_engine::FinishReason;
use kiln_frontend::{GenSpec, ReasoningStream, Split, TextStream};

use crate::engine_loop::SeqEvent;
use crate::error::ApiError;
use crate::metrics::Outcome;
use crate::state::Shared;

/// A generated or scored prompt token with its log-probabilities.
#[derive(Clone, Debug)]
pub struct TokenLogprob {
    pub id: u32,
    pub logprob: f32,
    pub top: Vec<(u32, f32)>,
    /// A scored prompt token's rank (1: the most likely).
    pub rank: Option<u32>,
}

impl TokenLogprob {
    /// `t` with at most `n` alternatives.
    fn new(t: &kiln_engine::SampledToken, n: u32) -> Self {
        Self {
            id: t.token_id,
            logprob: t.logprob.unwrap_or(0.0),
            top: t.top_logprobs.iter().take(n as usize).copied().collect(),
            rank: t.rank,
        }
    }
}

/// What one call of [`Sequence::next`] produced.
#[derive(Clone, Debug, Default)]
pub struct Delta {
    pub text: String,
    /// Tokens generated since the last delta (whose text this delta released, or holds back
    /// for a later one).
    pub tokens: usize,
    pub logprobs: Vec<TokenLogprob>,
    /// Scored prompt tokens (the prompt's first token excluded); all of them come before
    /// the first generated token.
    pub prompt_logprobs: Vec<TokenLogprob>,
    /// "stop" or "length" on the last delta.
    pub finish: Option<&'static str>,
    /// The stop string that ended the sequence, on the last delta.
    pub stop_string: Option<String>,
    /// The prompt's final hidden state, where the request asked for it (on its first token).
    pub hidden: Option<Vec<f32>>,
}

impl Delta {
    /// Appends the delta that follows this one.
    fn absorb(&mut self, d: Delta) {
        self.text += &d.text;
        self.tokens += d.tokens;
        self.logprobs.extend(d.logprobs);
        self.prompt_logprobs.extend(d.prompt_logprobs);
        self.finish = d.finish.or(self.finish);
        self.hidden = d.hidden.or(self.hidden.take());
    }
}

pub struct Sequence {
    state: Shared,
    pub id: u64,
    rx: flume::Receiver<SeqEvent>,
    text: TextStream,
    logprobs: Option<u32>,
    prompt_logprobs: Option<u32>,
    pub num_tokens: usize,
    pub num_cached: usize,
    done: bool,
    start: Instant,
    first: Option<Instant>,
    /// The output so far, kept for the request log (`--enable-log-outputs`).
    logged: Option<String>,
}

impl Sequence {
    pub fn new(state: Shared, id: u64, rx: flume::Receiver<SeqEvent>, spec: &GenSpec) -> Self {
        state
            .engine
            .health
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self {
            id,
            rx,
            text: spec.text_stream(),
            logprobs: spec.logprobs,
            prompt_logprobs: spec.prompt_logprobs,
            num_tokens: 0,
            num_cached: 0,
            done: false,
            start: Instant::now(),
            first: None,
            logged: state.config.request_log.outputs.then(String::new),
            state,
        }
    }

    /// The next piece of output; `None` after the last one.
    pub async fn next(&mut self) -> Result<Option<Delta>, ApiError> {
        if self.done {
            return Ok(None);
        }
        let mut delta = Delta::default();
        loop {
            let event = self.rx.recv_async().await;
            let u = match event {
                Ok(SeqEvent::Update(u)) => u,
                Ok(SeqEvent::Error(e)) => return Err(self.fail(e)),
                Ok(SeqEvent::Rejected(e)) => {
                    self.done = true;
                    return Err(ApiError::bad_request(e));
                }
                Err(_) => return Err(self.fail("the engine stopped".into())),
            };
            self.num_cached = u.num_cached_tokens;
            let state = self.state.clone();
            let tok = &state.model.tokenizer;
            if let Some(t) = &u.token {
                delta.hidden = delta.hidden.take().or_else(|| t.hidden.clone());
                self.num_tokens += 1;
                delta.tokens += 1;
                self.first.get_or_insert_with(Instant::now);
                self.state.metrics.generated_token();
                if let Some(n) = self.logprobs {
                    delta.logprobs.push(TokenLogprob::new(t, n));
                }
            }
            let n = self.prompt_logprobs.unwrap_or(0);
            let scored = u.prompt_logprobs.iter().map(|t| TokenLogprob::new(t, n));
            delta.prompt_logprobs.extend(scored);
            let out = self
                .text
                .update(tok, &u)
                .map_err(|e| self.fail(e.to_string()))?;
            delta.text += &out.text;
            if let Some(l) = &mut self.logged {
                l.push_str(&out.text);
            }
            if out.stopped {
                delta.stop_string = out.matched;
                self.state.engine.abort(self.id);
                return Ok(Some(self.finish(delta, Outcome::Stop)));
            }
            if let Some(reason) = u.finished {
                let outcome = match reason {
                    FinishReason::Stop => Outcome::Stop,
                    FinishReason::Length => Outcome::Length,
                    FinishReason::Abort => Outcome::Abort,
                };
                return Ok(Some(self.finish(delta, outcome)));
            }
            if !delta.text.is_empty() {
                return Ok(Some(delta));
            }
        }
    }

    /// Runs to the end; returns the whole text, the logprobs and the finish reason.
    pub async fn collect(mut self) -> Result<(Self, Delta), ApiError> {
        let mut all = Delta::default();
        while let Some(d) = self.next().await? {
            all.absorb(d);
        }
        Ok((self, all))
    }

    /// [`Self::collect`], the text split by `reasoning` as it comes (so each token is
    /// counted where it wrote); returns the split too, and the tokens that wrote reasoning.
    pub async fn collect_split(
        mut self,
        mut reasoning: ReasoningStream,
    ) -> Result<(Self, Delta, Split, usize), ApiError> {
        let (mut all, mut split) = (Delta::default(), Split::default());
        while let Some(d) = self.next().await? {
            let s = reasoning.push_tokens(&d.text, d.tokens, d.finish.is_some());
            split.reasoning += &s.reasoning;
            split.content += &s.content;
            all.absorb(d);
        }
        let n = reasoning.reasoning_tokens();
        Ok((self, all, split, n))
    }

    fn finish(&mut self, mut delta: Delta, outcome: Outcome) -> Delta {
        self.done = true;
        delta.finish = Some(match outcome {
            Outcome::Length => "length",
            _ => "stop",
        });
        self.log_output(delta.finish.unwrap_or("stop"));
        let e2e = self.start.elapsed().as_secs_f64();
        let ttft = self.first.map(|f| (f - self.start).as_secs_f64());
        self.state
            .metrics
            .finished(outcome, ttft, e2e, self.num_tokens);
        tracing::debug!(
            id = self.id,
            tokens = self.num_tokens,
            cached = self.num_cached,
            e2e_s = e2e,
            "sequence finished"
        );
        delta
    }

    /// The output to the request log, ended as `how`.
    fn log_output(&self, how: &str) {
        if let Some(text) = &self.logged {
            let log = &self.state.config.request_log;
            log.output(self.id, how, self.num_tokens, text);
        }
    }

    fn fail(&mut self, message: String) -> ApiError {
        self.log_output("error");
        self.done = true;
        self.state.metrics.error();
        ApiError::internal(message)
    }
}

impl Drop for Sequence {
    fn drop(&mut self) {
        self.state
            .engine
            .health
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        if !self.done {
            self.log_output("abort");
            self.state.engine.abort(self.id);
            self.state.metrics.finished(
                Outcome::Abort,
                None,
                self.start.elapsed().as_secs_f64(),
                self.num_tokens,
            );
        }
    }
}
