//! [`Frontend`]: the host-side half of a model, everything between a user's text and the
//! engine's token ids. The server, the CLI, the browser crate and the desktop app each hold
//! one and ask it the same questions, so they answer them the same way.

use kiln_model::{
    ChatInput, ChatMessage, ChatTemplate, GenerationDefaults, Model, ModelConfig, Tokenizer,
    Weights,
};
use kiln_scheduler::Request;
use serde_json::{Map, Value};

use crate::tools::ToolFormat;
use crate::{GenSpec, ParamError};

/// The text of the final message, which must be the assistant's, to continue it.
fn final_text(messages: &[ChatMessage]) -> Result<String, ParamError> {
    match messages.last() {
        Some(m) if m.role == "assistant" && !m.text().is_empty() => Ok(m.text().to_string()),
        _ => Err(ParamError::new(
            "messages",
            "continuing the final message needs a final assistant message with text",
        )),
    }
}

/// What a chat render reads beside the messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChatExtras<'a> {
    /// Text for the system message (appended to the conversation's own, or made one).
    pub system: Option<&'a str>,
    /// Tools for a template that describes them itself (the OpenAI `tools` shape).
    pub tools: Option<&'a [Value]>,
    /// Further template variables (`chat_template_kwargs`).
    pub kwargs: Option<&'a Map<String, Value>>,
    /// How the rendered conversation ends.
    pub ending: Ending,
}

/// How a rendered conversation ends (vLLM's `add_generation_prompt` and
/// `continue_final_message`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ending {
    /// With the assistant turn's header: the reply is a new turn.
    #[default]
    NewTurn,
    /// As the last message left it (no header).
    AsIs,
    /// Inside the final assistant message, after its text, which the reply continues
    /// (Anthropic's prefill).
    ContinueLast,
}

pub struct Frontend {
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
    /// The model's own sampling settings (the requests' defaults).
    pub defaults: GenerationDefaults,
    pub eos_token_ids: Vec<u32>,
    pub vocab_size: usize,
    /// How the model writes tool calls (from its chat template).
    pub tool_format: ToolFormat,
}

impl Frontend {
    pub fn new(
        tokenizer: Tokenizer,
        chat_template: Option<ChatTemplate>,
        config: &ModelConfig,
    ) -> Self {
        Self {
            tool_format: ToolFormat::detect(chat_template.as_ref(), &tokenizer),
            tokenizer,
            chat_template,
            defaults: config.generation,
            eos_token_ids: config.eos_token_ids.clone(),
            vocab_size: config.vocab_size,
        }
    }

    /// Splits a loaded model into its front end and what the engine uploads.
    pub fn split(model: Model) -> (Frontend, ModelConfig, Weights) {
        let Model {
            config,
            weights,
            tokenizer,
            chat_template,
            ..
        } = model;
        (
            Self::new(tokenizer, chat_template, &config),
            config,
            weights,
        )
    }

    /// Checks a prompt against the vocabulary and a context of `max_len` tokens; returns the
    /// number of tokens to generate: `max_tokens` if it fits (an error if not), else
    /// `default_max` or what the context has room for, whichever is less.
    pub fn check_prompt(
        &self,
        prompt: &[u32],
        max_len: usize,
        max_tokens: Option<usize>,
        default_max: Option<usize>,
    ) -> Result<usize, ParamError> {
        if prompt.is_empty() {
            return Err(ParamError::new("prompt", "the prompt is empty"));
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(ParamError::new(
                "prompt",
                format!(
                    "token id {bad} is out of the vocabulary (size {})",
                    self.vocab_size
                ),
            ));
        }
        let room = max_len.saturating_sub(prompt.len());
        let too_long = |m: usize| {
            ParamError::new(
                "max_tokens",
                format!(
                    "This model's maximum context length is {max_len} tokens. However, you requested {} tokens ({} in the prompt, {m} for the completion).",
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

    /// Renders a conversation with the model's chat template (ChatML when it has none),
    /// ending with the assistant's turn. `extras.system` is appended to the first system
    /// message, or becomes one; `extras.tools` and `extras.kwargs` go to the template.
    pub fn render_chat(
        &self,
        mut messages: Vec<ChatMessage>,
        extras: &ChatExtras,
    ) -> Result<String, ParamError> {
        if messages.is_empty() {
            return Err(ParamError::new("messages", "messages must not be empty"));
        }
        if let Some(sys) = extras.system {
            match messages.first_mut() {
                Some(first) if first.role == "system" => {
                    first.content = Some(format!("{}\n\n{sys}", first.text()))
                }
                _ => messages.insert(0, ChatMessage::new("system", sys)),
            }
        }
        let last = match extras.ending {
            Ending::ContinueLast => Some(final_text(&messages)?),
            _ => None,
        };
        let rendered = match &self.chat_template {
            Some(t) => t
                .render_input(&ChatInput {
                    messages: &messages,
                    tools: extras.tools,
                    add_generation_prompt: extras.ending == Ending::NewTurn,
                    kwargs: extras.kwargs,
                })
                .map_err(|e| ParamError::new("messages", e.to_string()))?,
            None if extras.tools.is_some() => {
                return Err(ParamError::new(
                    "tools",
                    "the model has no chat template to describe tools with",
                ));
            }
            None => {
                let mut s: String = messages
                    .iter()
                    .map(|m| format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.text()))
                    .collect();
                if extras.ending == Ending::NewTurn {
                    s.push_str("<|im_start|>assistant\n");
                }
                s
            }
        };
        match last {
            None => Ok(rendered),
            // What the template writes after the final message's text (its end-of-turn
            // marker) is cut, so the reply goes on from the text (from its trimmed end where
            // the template trims it, as many do).
            Some(text) => match [text.as_str(), text.trim_end(), text.trim()]
                .into_iter()
                .find_map(|t| Some(rendered.rfind(t).filter(|_| !t.is_empty())? + t.len()))
            {
                Some(end) => Ok(rendered[..end].to_string()),
                None => Err(ParamError::new(
                    "messages",
                    "the chat template does not write the final assistant message's text as given, so it cannot be continued",
                )),
            },
        }
    }

    /// The token ids of a conversation ready for the assistant's reply (the template writes
    /// any special tokens itself).
    pub fn chat_tokens(
        &self,
        messages: Vec<ChatMessage>,
        system: Option<&str>,
    ) -> Result<Vec<u32>, ParamError> {
        let extras = ChatExtras {
            system,
            ..ChatExtras::default()
        };
        let text = self.render_chat(messages, &extras)?;
        self.encode(&text, false, "messages")
    }

    /// Tokenizes `text`; a failure is blamed on request field `param`.
    pub fn encode(
        &self,
        text: &str,
        add_special_tokens: bool,
        param: &str,
    ) -> Result<Vec<u32>, ParamError> {
        self.tokenizer
            .encode(text, add_special_tokens)
            .map_err(|e| ParamError::new(param, e.to_string()))
    }

    /// The engine request for choice `choice` of `spec` (seed `base_seed + choice`).
    pub fn request(
        &self,
        spec: &GenSpec,
        id: u64,
        prompt: Vec<u32>,
        max_tokens: usize,
        base_seed: u64,
        choice: usize,
    ) -> Request {
        Request {
            sampling: spec.sampling,
            seed: base_seed.wrapping_add(choice as u64),
            ignore_eos: spec.ignore_eos,
            eos_token_ids: self.eos_token_ids.clone(),
            cache_salt: spec.cache_salt.clone(),
            prompt_logprobs: spec.prompt_logprobs,
            logit_bias: spec.logit_bias.clone(),
            min_tokens: spec.min_tokens,
            stop_token_ids: spec.stop_token_ids.clone(),
            priority: spec.priority,
            filter: spec.filter.clone(),
            return_hidden: spec.return_hidden,
            lora: spec.lora,
            ..Request::new(id, prompt, max_tokens)
        }
    }
}
