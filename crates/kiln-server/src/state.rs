//! What every handler shares: the engine handle, the tokenizer and chat template, metrics,
//! and the server settings. Also the checks that turn API knobs into engine requests.

use std::sync::Arc;

use kiln_engine::{Request, SamplingParams};
use kiln_model::{ChatMessage, ChatTemplate, Model, ModelConfig, Tokenizer, Weights};

use crate::ServerConfig;
use crate::api::{ChatMessageIn, MessageContent, Sampling};
use crate::engine_loop::EngineHandle;
use crate::error::ApiError;
use crate::generate::Sequence;
use crate::metrics::Metrics;

/// The model's host-side parts the handlers need.
pub struct ModelInfo {
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    pub eos_token_ids: Vec<u32>,
    pub vocab_size: usize,
}

impl ModelInfo {
    /// Splits a loaded model into what the handlers keep and what the engine factory uploads.
    pub fn split(model: Model) -> (ModelInfo, ModelConfig, Weights) {
        let Model {
            config,
            weights,
            tokenizer,
            chat_template,
            ..
        } = model;
        let info = ModelInfo {
            tokenizer,
            chat_template,
            eos_token_ids: config.eos_token_ids.clone(),
            vocab_size: config.vocab_size,
        };
        (info, config, weights)
    }
}

pub struct AppState {
    pub config: ServerConfig,
    pub model: ModelInfo,
    pub engine: EngineHandle,
    pub metrics: Metrics,
    pub created: u64,
    /// The grammar compiler for structured outputs, built on first use.
    pub constraints: std::sync::OnceLock<Result<kiln_engine::ConstraintFactory, String>>,
}

pub type Shared = Arc<AppState>;

/// A validated generation request, before it is split into `n` engine requests.
pub struct GenSpec {
    pub sampling: SamplingParams,
    pub seed: Option<u64>,
    pub n: usize,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    pub max_tokens: Option<usize>,
    /// Top logprobs to report per token (`Some(0)`: only the chosen token's).
    pub logprobs: Option<u32>,
}

impl AppState {
    pub fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            Some(m) if m != self.config.served_model_name => Err(ApiError::model_not_found(m)),
            _ => Ok(()),
        }
    }

    pub fn gen_spec(
        &self,
        s: &Sampling,
        max_tokens: Option<i64>,
        logprobs: Option<u32>,
    ) -> Result<GenSpec, ApiError> {
        let n = s.n.unwrap_or(1);
        if n == 0 || n > 64 {
            return Err(ApiError::bad_param("n", "n must be between 1 and 64"));
        }
        let max_tokens = match max_tokens {
            Some(m) if m < 1 => {
                return Err(ApiError::bad_param(
                    "max_tokens",
                    "max_tokens must be at least 1",
                ));
            }
            Some(m) => Some(m as usize),
            None => None,
        };
        let top_k = match s.top_k {
            None | Some(-1) | Some(0) => 0,
            Some(k) if k > 0 && k <= u32::MAX as i64 => k as u32,
            Some(_) => {
                return Err(ApiError::bad_param(
                    "top_k",
                    "top_k must be -1 (off) or a positive integer",
                ));
            }
        };
        if let Some(l) = logprobs
            && l > 20
        {
            return Err(ApiError::bad_param(
                "top_logprobs",
                "top_logprobs must be at most 20",
            ));
        }
        let d = SamplingParams::default();
        let sampling = SamplingParams {
            temperature: s.temperature.unwrap_or(d.temperature),
            top_k,
            top_p: s.top_p.unwrap_or(d.top_p),
            min_p: s.min_p.unwrap_or(d.min_p),
            repetition_penalty: s.repetition_penalty.unwrap_or(d.repetition_penalty),
            presence_penalty: s.presence_penalty.unwrap_or(d.presence_penalty),
            frequency_penalty: s.frequency_penalty.unwrap_or(d.frequency_penalty),
            // The runner reports the chosen token's logprob only when it computes top logprobs.
            top_logprobs: logprobs.map_or(0, |l| l.max(1)),
            logprobs_mode: self.config.logprobs_mode,
        };
        sampling.validate().map_err(|why| {
            let param = why.split(' ').next().unwrap_or("").to_string();
            ApiError::bad_param(&param, why)
        })?;
        let stop = s.stop.clone().map(|s| s.into_vec()).unwrap_or_default();
        Ok(GenSpec {
            sampling,
            seed: s.seed.map(|x| x as u64),
            n: n as usize,
            stop,
            ignore_eos: s.ignore_eos.unwrap_or(false),
            max_tokens,
            logprobs,
        })
    }

    /// Checks the prompt against the context and vocabulary; returns the max_tokens to use.
    pub fn check_prompt(
        &self,
        prompt: &[u32],
        max_tokens: Option<usize>,
        default_max: Option<usize>,
    ) -> Result<usize, ApiError> {
        let limit = self.engine.info.max_len;
        if prompt.is_empty() {
            return Err(ApiError::bad_param("prompt", "the prompt is empty"));
        }
        if let Some(&bad) = prompt
            .iter()
            .find(|&&t| t as usize >= self.model.vocab_size)
        {
            return Err(ApiError::bad_param(
                "prompt",
                format!(
                    "token id {bad} is out of the vocabulary (size {})",
                    self.model.vocab_size
                ),
            ));
        }
        let room = limit.saturating_sub(prompt.len());
        let too_long = |m: usize| {
            ApiError::bad_param(
                "max_tokens",
                format!(
                    "This model's maximum context length is {limit} tokens. However, you requested {} tokens ({} in the prompt, {m} for the completion).",
                    prompt.len() + m,
                    prompt.len()
                ),
            )
        };
        if room == 0 {
            return Err(too_long(max_tokens.unwrap_or(1)));
        }
        match max_tokens {
            Some(m) if m > room => Err(too_long(m)),
            Some(m) => Ok(m),
            None => Ok(default_max.unwrap_or(room).min(room)),
        }
    }

    /// Renders chat messages with the model's template (ChatML when it has none). `system`
    /// (the tool description) is appended to the first system message, or becomes one.
    /// Assistant tool calls are written as the generic tool format's JSON.
    pub fn render_chat(&self, messages: &[ChatMessageIn]) -> Result<String, ApiError> {
        self.render_chat_with(messages, None)
    }

    pub fn render_chat_with(
        &self,
        messages: &[ChatMessageIn],
        system: Option<&str>,
    ) -> Result<String, ApiError> {
        if messages.is_empty() {
            return Err(ApiError::bad_param(
                "messages",
                "messages must not be empty",
            ));
        }
        let mut msgs = Vec::with_capacity(messages.len() + 1);
        // Tool call ids the assistant turns so far made, with their function names.
        let mut calls_made = std::collections::HashMap::new();
        for m in messages {
            let mut content = match &m.content {
                None => String::new(),
                Some(MessageContent::Text(t)) => t.clone(),
                Some(MessageContent::Parts(parts)) => {
                    let mut s = String::new();
                    for p in parts {
                        match (&*p.kind, &p.text) {
                            ("text", Some(t)) => s.push_str(t),
                            _ => {
                                return Err(ApiError::bad_param(
                                    "messages",
                                    format!("content parts of type `{}` are not supported", p.kind),
                                ));
                            }
                        }
                    }
                    s
                }
            };
            if let Some(calls) = m.tool_calls.as_deref().filter(|c| !c.is_empty()) {
                if m.role != "assistant" {
                    return Err(ApiError::bad_param(
                        "messages",
                        "only assistant messages carry tool_calls",
                    ));
                }
                content = crate::tools::calls_as_text(calls)?;
                for c in calls {
                    if let (Some(id), Some(name)) =
                        (c["id"].as_str(), c["function"]["name"].as_str())
                    {
                        calls_made.insert(id.to_string(), name.to_string());
                    }
                }
            }
            crate::tools::check_tool_reply(m, &calls_made)?;
            msgs.push(ChatMessage::new(m.role.clone(), content));
        }
        if let Some(sys) = system {
            match msgs.first_mut() {
                Some(first) if first.role == "system" => {
                    first.content = format!("{}\n\n{sys}", first.content)
                }
                _ => msgs.insert(0, ChatMessage::new("system", sys)),
            }
        }
        match &self.model.chat_template {
            Some(t) => t
                .render(&msgs, true)
                .map_err(|e| ApiError::bad_param("messages", e.to_string())),
            None => {
                let mut s: String = msgs
                    .iter()
                    .map(|m| format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content))
                    .collect();
                s.push_str("<|im_start|>assistant\n");
                Ok(s)
            }
        }
    }

    /// Queues `spec.n` requests for `prompt`, each with its matcher from `constraints` when
    /// given; 503 when the server cannot serve (draining, the engine down) or the waiting queue
    /// is full; 400 when the request could never fit a step.
    pub fn submit(
        self: &Arc<Self>,
        prompt: &[u32],
        max_tokens: usize,
        spec: &GenSpec,
        constraints: Vec<kiln_engine::Constraint>,
    ) -> Result<Vec<Sequence>, ApiError> {
        if let Err(reason) = self.engine.health.check() {
            self.metrics.rejected();
            return Err(ApiError::unavailable(reason));
        }
        let limit = self.engine.info.max_penalty_entries;
        let reach = (prompt.len() + max_tokens).min(self.engine.info.max_len);
        if spec.sampling.has_penalties() && reach > limit {
            return Err(ApiError::bad_param(
                "max_tokens",
                format!(
                    "with penalties this request may reach {reach} tokens, but one step holds penalty entries for at most {limit} tokens; lower max_tokens or drop the penalties"
                ),
            ));
        }
        if self.engine.queued() + spec.n > self.config.max_waiting {
            self.metrics.rejected();
            return Err(ApiError::overloaded(1));
        }
        self.metrics.prompt(prompt.len());
        let base_seed = spec.seed.unwrap_or_else(rand::random);
        let mut constraints = constraints.into_iter();
        Ok((0..spec.n)
            .map(|i| {
                let id = self.engine.next_id();
                let request = Request {
                    sampling: spec.sampling,
                    seed: base_seed.wrapping_add(i as u64),
                    ignore_eos: spec.ignore_eos,
                    eos_token_ids: self.model.eos_token_ids.clone(),
                    ..Request::new(id, prompt.to_vec(), max_tokens)
                };
                let rx = self.engine.add(request, constraints.next());
                Sequence::new(self.clone(), id, rx, spec.stop.clone(), spec.logprobs)
            })
            .collect())
    }
}
