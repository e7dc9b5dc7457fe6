//! What every handler shares: the engine handle, the tokenizer and chat template, metrics,
//! and the server settings. Also the checks that turn API knobs into engine requests.

use std::sync::Arc;

use kiln_engine::LoraRef;
use kiln_frontend::tools::{ChatTurn, ToolPlan};
use kiln_frontend::{Ending, Frontend, GenSpec, GenerationParams, ReasoningFormat};
use serde_json::{Map, Value};

use crate::ServerConfig;
use crate::api::{ChatMessageIn, MessageContent};
use crate::engine_loop::EngineHandle;
use crate::error::ApiError;
use crate::generate::Sequence;
use crate::metrics::Metrics;

pub struct AppState {
    pub config: ServerConfig,
    /// The model's host side: tokenizer, chat template, the model's sampling defaults.
    pub model: Arc<Frontend>,
    pub engine: Arc<EngineHandle>,
    pub metrics: Metrics,
    pub created: u64,
    /// How the model sets its reasoning apart (from its chat template, or configured).
    pub reasoning: ReasoningFormat,
    /// The grammar compiler for structured outputs, built on first use.
    pub constraints: kiln_engine::GrammarCompiler,
    /// Names this server's engine in the `kv_transfer_params` it answers as a producer.
    pub kv_engine_id: String,
    /// The port the server listens on.
    pub port: u16,
    /// Responses kept for `previous_response_id` (`/v1/responses`).
    pub responses: crate::responses::ResponseStore,
}

pub type Shared = Arc<AppState>;

impl AppState {
    /// Whether `name` is one of the served model's names.
    pub fn serves(&self, name: &str) -> bool {
        name == self.config.served_model_name || self.config.model_aliases.iter().any(|a| a == name)
    }

    /// The LoRA adapter a request's `model` names: `None` for the served model (by any of its
    /// names, or no `model`), an error for a name that is neither it nor a loaded adapter's.
    pub fn check_model(&self, model: Option<&str>) -> Result<Option<LoraRef>, ApiError> {
        match model {
            Some(m) if !self.serves(m) => match self.engine.lora.find(m) {
                Some((r, _)) => Ok(Some(r)),
                None => Err(ApiError::model_not_found(m)),
            },
            _ => Ok(None),
        }
    }

    /// The name a response gives as its `model`: the adapter's, or the served model's.
    pub fn model_name(&self, spec: &GenSpec) -> String {
        match spec.lora.and_then(|r| self.engine.lora.get(r)) {
            Some(a) => a.name.clone(),
            None => self.config.served_model_name.clone(),
        }
    }

    /// The prefix-cache salt the engine gives the request's blocks (its adapter's, if any).
    pub fn cache_salt(&self, spec: &GenSpec) -> Option<String> {
        match spec.lora.and_then(|r| self.engine.lora.get(r)) {
            Some(a) => Some(a.salt(spec.cache_salt.as_deref())),
            None => spec.cache_salt.clone(),
        }
    }

    /// Checks the request's generation knobs (`max_tokens` as the endpoint reads it) and
    /// fills the unset ones from the model's defaults.
    pub fn gen_spec(
        &self,
        params: &GenerationParams,
        max_tokens: Option<i64>,
        logprobs: Option<u32>,
    ) -> Result<GenSpec, ApiError> {
        let params = GenerationParams {
            max_tokens,
            ..params.clone()
        };
        let mut spec = self.model.resolve(&params, logprobs)?;
        if spec.priority != 0 && !self.config.priority_scheduling {
            return Err(ApiError::bad_param(
                "priority",
                "this server schedules first come first served; start it with --scheduling-policy priority to take priorities",
            ));
        }
        spec.sampling.logprobs_mode = self.config.logprobs_mode;
        Ok(spec)
    }

    /// Checks the prompt against the context and vocabulary; returns the max_tokens to use.
    pub fn check_prompt(
        &self,
        prompt: &[u32],
        max_tokens: Option<usize>,
        default_max: Option<usize>,
    ) -> Result<usize, ApiError> {
        Ok(self
            .model
            .check_prompt(prompt, self.engine.info.max_len, max_tokens, default_max)?)
    }

    /// Renders chat messages with the model's template (ChatML when it has none).
    pub fn render_chat(&self, messages: &[ChatMessageIn]) -> Result<String, ApiError> {
        self.render_chat_with(messages, None, None, Ending::NewTurn)
    }

    /// Renders chat messages with the tools of `plan` (the shared front end's
    /// [`Frontend::render_turns`]: the tools given to a template that renders them or described
    /// in the system message, past calls as the template's data or the generic format's JSON).
    /// `kwargs`: the request's `chat_template_kwargs`; `ending`: how the rendered conversation
    /// ends.
    pub fn render_chat_with(
        &self,
        messages: &[ChatMessageIn],
        plan: Option<&ToolPlan>,
        kwargs: Option<&Map<String, Value>>,
        ending: Ending,
    ) -> Result<String, ApiError> {
        let turns = messages
            .iter()
            .map(|m| {
                Ok(ChatTurn {
                    role: m.role.clone(),
                    content: m.content.clone(),
                    tool_calls: m.tool_calls.clone(),
                    tool_call_id: m.tool_call_id.clone(),
                    name: m.name.clone(),
                    reasoning_content: m.reasoning_content.clone(),
                })
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        Ok(self.model.render_turns(turns, plan, kwargs, ending)?)
    }

    /// Queues `spec.n` requests for `prompt`, each with its matcher from `constraints` when
    /// given; 503 when the server cannot serve (draining, the engine down) or the waiting queue
    /// is full; 400 when the request could never fit a step. With `pin_blocks` each request's
    /// blocks stay pinned for a decode server when it finishes (`kv_transfer`).
    pub fn submit(
        self: &Arc<Self>,
        prompt: &[u32],
        max_tokens: usize,
        spec: &GenSpec,
        constraints: Vec<kiln_engine::Constraint>,
        pin_blocks: bool,
    ) -> Result<Vec<Sequence>, ApiError> {
        if let Err(reason) = self.engine.health.check() {
            self.metrics.rejected();
            return Err(ApiError::unavailable(reason));
        }
        if spec.min_tokens > max_tokens {
            return Err(ApiError::bad_param(
                "min_tokens",
                format!(
                    "min_tokens ({}) must be at most the tokens this request may generate ({max_tokens})",
                    spec.min_tokens
                ),
            ));
        }
        let limit = self.engine.info.max_penalty_entries;
        let reach = (prompt.len() + max_tokens).min(self.engine.info.max_len);
        let biased = spec.logit_bias.len();
        if spec.sampling.has_penalties() && reach + biased > limit {
            return Err(ApiError::bad_param(
                "max_tokens",
                format!(
                    "with penalties this request may reach {reach} tokens (and {biased} biased ones), but the penalty pool holds entries for at most {limit} tokens; lower max_tokens or drop the penalties"
                ),
            ));
        }
        if biased > limit {
            return Err(ApiError::bad_param(
                "logit_bias",
                format!("{biased} biased tokens, but the penalty pool holds at most {limit}"),
            ));
        }
        if self.engine.queued() + spec.n > self.config.max_waiting {
            self.metrics.rejected();
            return Err(ApiError::overloaded(1));
        }
        self.metrics.prompt(prompt.len());
        let base_seed = spec.seed.unwrap_or_else(rand::random);
        let mut constraints = constraints.into_iter();
        let seqs: Vec<Sequence> = (0..spec.n)
            .map(|i| {
                let id = self.engine.next_id();
                let request = kiln_engine::Request {
                    pin_blocks,
                    ..self
                        .model
                        .request(spec, id, prompt.to_vec(), max_tokens, base_seed, i)
                };
                let rx = self.engine.add(request, constraints.next());
                Sequence::new(self.clone(), id, rx, spec)
            })
            .collect();
        let ids = seqs.iter().map(|s| s.id);
        let log = &self.config.request_log;
        log.request(ids, prompt, &self.model.tokenizer, max_tokens, spec);
        Ok(seqs)
    }
}

/// A message's text: a string, or text parts joined; `None` when it has no content.
pub(crate) fn message_text(m: &ChatMessageIn) -> Result<Option<String>, ApiError> {
    Ok(m.content.as_ref().map(MessageContent::text).transpose()?)
}
