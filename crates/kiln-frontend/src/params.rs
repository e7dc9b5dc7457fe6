//! Generation parameters as every front end receives them (the OpenAI API's names, all
//! optional), checked once and turned into a [`GenSpec`], with the model's own settings
//! filling what the request leaves unset.

use kiln_core::{SamplingParams, TokenFilter};
use kiln_model::GenerationDefaults;
use serde::{Deserialize, Serialize};

use crate::TextStream;

/// A parameter the request got wrong: which one, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    /// The request field at fault (`"top_k"`, `"messages"`, ...).
    pub param: String,
    pub message: String,
}

impl ParamError {
    pub fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            param: param.into(),
            message: message.into(),
        }
    }
}

/// One stop string or several (both are valid in the OpenAI API).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum StopSpec {
    One(String),
    Many(Vec<String>),
}

impl StopSpec {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopSpec::One(s) => vec![s],
            StopSpec::Many(v) => v,
        }
    }
}

/// The generation knobs, as the API spells them; `None` is "not set". Also what the desktop
/// app keeps per chat (serialized without the unset ones).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct GenerationParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// -1 or 0: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Completions per prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// vLLM's `prompt_logprobs`: each prompt token's log-probability after the first, with
    /// this many most likely alternatives. With it `max_tokens` may be 0 (score only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<i64>,
    /// Isolates prefix-cache sharing (vLLM's field): cached blocks are shared only between
    /// requests with the same salt, so one tenant cannot time another's prompts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_salt: Option<String>,
    /// OpenAI's `logit_bias`: token id (as a string) to a bias in [-100, 100], added to that
    /// token's logit before sampling (after the penalties).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logit_bias: Option<std::collections::BTreeMap<String, f32>>,
    /// vLLM's `skip_special_tokens` (default true): `false` keeps special tokens' text in
    /// the output (the token that stopped the sequence still writes none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_special_tokens: Option<bool>,
    /// vLLM's `min_tokens`: no end-of-sequence or stop token (id or string) ends a sequence
    /// before this many tokens (at most `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<i64>,
    /// vLLM's `stop_token_ids`: these tokens end a sequence as end-of-sequence does (writing
    /// no text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_token_ids: Option<Vec<u32>>,
    /// vLLM's `include_stop_str_in_output`: the stop string that ended a sequence is kept at
    /// the end of its text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_stop_str_in_output: Option<bool>,
    /// vLLM's `priority`: lower is scheduled first (a server takes it only when started with
    /// priority scheduling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// vLLM's `truncate_prompt_tokens`: a prompt longer than this keeps only its last this
    /// many tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncate_prompt_tokens: Option<i64>,
    /// vLLM's `allowed_token_ids`: only these tokens may be sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_token_ids: Option<Vec<u32>>,
    /// vLLM's `bad_words`: words never generated. Each word's tokens, with and without a
    /// leading space, are banned as sequences: the last token is never sampled after the
    /// ones before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_words: Option<Vec<String>>,
}

/// Most completions one request may ask for.
pub const MAX_N: u32 = 64;
/// Most top log-probabilities per token.
pub const MAX_TOP_LOGPROBS: u32 = 20;

/// A checked generation request, before it is split into `n` engine requests.
#[derive(Debug, Clone)]
pub struct GenSpec {
    pub sampling: SamplingParams,
    pub seed: Option<u64>,
    pub n: usize,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    pub max_tokens: Option<usize>,
    /// Top log-probabilities to report per token (`Some(0)`: only the chosen token's).
    pub logprobs: Option<u32>,
    /// Score the prompt, reporting this many alternatives per prompt token.
    pub prompt_logprobs: Option<u32>,
    pub cache_salt: Option<String>,
    /// Token ids and their biases, by id (see [`GenerationParams::logit_bias`]).
    pub logit_bias: Vec<(u32, f32)>,
    /// Whether special tokens write no text (see [`GenerationParams::skip_special_tokens`]).
    pub skip_special_tokens: bool,
    /// Tokens before any stop ends a sequence (see [`GenerationParams::min_tokens`]).
    pub min_tokens: usize,
    pub stop_token_ids: Vec<u32>,
    /// Whether the stop string that ended a sequence stays in its text.
    pub include_stop_str: bool,
    /// Lower is scheduled first (see [`GenerationParams::priority`]).
    pub priority: i32,
    /// Most prompt tokens kept, the last ones (see [`GenerationParams::truncate_prompt_tokens`]).
    pub truncate_prompt_tokens: Option<usize>,
    /// Tokens never sampled (`allowed_token_ids`, and `bad_words` as tokens: see
    /// [`crate::Frontend::resolve`]).
    pub filter: TokenFilter,
    /// The prompt's final hidden state comes back with the first token (an embedding; no
    /// request field sets it, the embeddings endpoint does).
    pub return_hidden: bool,
    /// The LoRA adapter the request runs through: the server sets it from the request's
    /// `model`.
    pub lora: Option<kiln_scheduler::LoraRef>,
}

impl GenSpec {
    /// Keeps only the last `truncate_prompt_tokens` tokens of `prompt`, where asked.
    pub fn truncate(&self, prompt: &mut Vec<u32>) {
        if let Some(k) = self.truncate_prompt_tokens
            && prompt.len() > k
        {
            prompt.drain(..prompt.len() - k);
        }
    }

    /// The text of one generated sequence, cut at this request's stop strings.
    pub fn text_stream(&self) -> TextStream {
        TextStream::new(self.stop.clone(), self.skip_special_tokens)
            .including_stop(self.include_stop_str)
            .stops_after(self.min_tokens)
    }
}

/// kiln's sampling settings where neither the request nor the model sets a knob.
pub fn base_sampling(defaults: &GenerationDefaults) -> SamplingParams {
    let d = SamplingParams::default();
    SamplingParams {
        temperature: defaults.temperature.unwrap_or(d.temperature),
        top_p: defaults.top_p.unwrap_or(d.top_p),
        top_k: defaults.top_k.unwrap_or(d.top_k),
        min_p: defaults.min_p.unwrap_or(d.min_p),
        repetition_penalty: defaults.repetition_penalty.unwrap_or(d.repetition_penalty),
        ..d
    }
}

impl GenerationParams {
    /// Checks every knob and fills the unset ones from `defaults` (the model's settings,
    /// then kiln's). `logprobs`: top log-probabilities per token, when asked. What needs the
    /// model's vocabulary and tokenizer is left to [`crate::Frontend::resolve`], the one
    /// public way in.
    pub(crate) fn resolve(
        &self,
        defaults: &GenerationDefaults,
        logprobs: Option<u32>,
    ) -> Result<GenSpec, ParamError> {
        let n = self.n.unwrap_or(1);
        if n == 0 || n > MAX_N {
            return Err(ParamError::new(
                "n",
                format!("n must be between 1 and {MAX_N}"),
            ));
        }
        let prompt_logprobs = match self.prompt_logprobs {
            Some(n) if !(0..=MAX_TOP_LOGPROBS as i64).contains(&n) => {
                return Err(ParamError::new(
                    "prompt_logprobs",
                    format!(
                        "prompt_logprobs must be between 0 and {MAX_TOP_LOGPROBS} (kiln does not return the whole vocabulary)"
                    ),
                ));
            }
            n => n.map(|n| n as u32),
        };
        let max_tokens = match self.max_tokens {
            Some(0) if prompt_logprobs.is_some() => Some(0),
            Some(m) if m < 1 => {
                return Err(ParamError::new(
                    "max_tokens",
                    "max_tokens must be at least 1 (0 only when the prompt is scored: prompt_logprobs, or echo with logprobs)",
                ));
            }
            m => m.map(|m| m as usize),
        };
        let priority = match self.priority.map(i32::try_from) {
            None => 0,
            Some(Ok(p)) => p,
            Some(Err(_)) => {
                return Err(ParamError::new("priority", "priority must fit in 32 bits"));
            }
        };
        let truncate_prompt_tokens = match self.truncate_prompt_tokens {
            Some(k) if k < 1 => {
                return Err(ParamError::new(
                    "truncate_prompt_tokens",
                    "truncate_prompt_tokens must be at least 1",
                ));
            }
            k => k.map(|k| k as usize),
        };
        let min_tokens = match self.min_tokens {
            None => 0,
            Some(m) if m < 0 => {
                return Err(ParamError::new(
                    "min_tokens",
                    "min_tokens must be at least 0",
                ));
            }
            Some(m) if max_tokens.is_some_and(|max| m as usize > max) => {
                return Err(ParamError::new(
                    "min_tokens",
                    format!(
                        "min_tokens ({m}) must be at most max_tokens ({})",
                        max_tokens.unwrap_or(0)
                    ),
                ));
            }
            Some(m) => m as usize,
        };
        if let Some(l) = logprobs
            && l > MAX_TOP_LOGPROBS
        {
            return Err(ParamError::new(
                "top_logprobs",
                format!("top_logprobs must be at most {MAX_TOP_LOGPROBS}"),
            ));
        }
        if self.cache_salt.as_deref() == Some("") {
            return Err(ParamError::new(
                "cache_salt",
                "cache_salt must be a non-empty string (or left out)",
            ));
        }
        let logit_bias = self.logit_bias_ids()?;
        let allowed = self.allowed_ids()?;
        let base = base_sampling(defaults);
        let top_k = match self.top_k {
            None => base.top_k,
            Some(-1) | Some(0) => 0,
            Some(k) if k > 0 && k <= u32::MAX as i64 => k as u32,
            Some(_) => {
                return Err(ParamError::new(
                    "top_k",
                    "top_k must be -1 (off) or a positive integer",
                ));
            }
        };
        let sampling = SamplingParams {
            temperature: self.temperature.unwrap_or(base.temperature),
            top_k,
            top_p: self.top_p.unwrap_or(base.top_p),
            min_p: self.min_p.unwrap_or(base.min_p),
            repetition_penalty: self.repetition_penalty.unwrap_or(base.repetition_penalty),
            presence_penalty: self.presence_penalty.unwrap_or(base.presence_penalty),
            frequency_penalty: self.frequency_penalty.unwrap_or(base.frequency_penalty),
            // The runner reports the chosen token's logprob only when it computes top logprobs.
            top_logprobs: logprobs.map_or(0, |l| l.max(1)),
            ..base
        };
        sampling.validate().map_err(|why| {
            let param = why.split(' ').next().unwrap_or("").to_string();
            ParamError::new(param, why)
        })?;
        Ok(GenSpec {
            sampling,
            seed: self.seed.map(|x| x as u64),
            n: n as usize,
            stop: self
                .stop
                .clone()
                .map(StopSpec::into_vec)
                .unwrap_or_default(),
            ignore_eos: self.ignore_eos.unwrap_or(false),
            max_tokens,
            logprobs,
            prompt_logprobs,
            cache_salt: self.cache_salt.clone(),
            logit_bias,
            skip_special_tokens: self.skip_special_tokens.unwrap_or(true),
            min_tokens,
            stop_token_ids: self.stop_token_ids.clone().unwrap_or_default(),
            include_stop_str: self.include_stop_str_in_output.unwrap_or(false),
            priority,
            truncate_prompt_tokens,
            filter: TokenFilter {
                allowed,
                banned: Vec::new(),
            },
            return_hidden: false,
            lora: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> GenerationParams {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn unset_knobs_come_from_the_model_then_from_kiln() {
        let model = GenerationDefaults {
            temperature: Some(0.6),
            top_k: Some(20),
            ..Default::default()
        };
        let spec = params(r#"{"top_p": 0.9}"#).resolve(&model, None).unwrap();
        assert_eq!(spec.sampling.temperature, 0.6);
        assert_eq!(spec.sampling.top_k, 20);
        assert_eq!(spec.sampling.top_p, 0.9);
        assert_eq!(spec.sampling.min_p, SamplingParams::default().min_p);
        let spec = params(r#"{"temperature": 0, "top_k": -1}"#)
            .resolve(&model, None)
            .unwrap();
        assert_eq!(spec.sampling.temperature, 0.0);
        assert_eq!(spec.sampling.top_k, 0);
        let none = params("{}").resolve(&Default::default(), None).unwrap();
        assert_eq!(none.sampling, SamplingParams::default());
        assert_eq!((none.n, none.max_tokens, none.seed), (1, None, None));
    }

    #[test]
    fn bad_knobs_name_their_field() {
        let d = GenerationDefaults::default();
        for (json, field) in [
            (r#"{"n": 0}"#, "n"),
            (r#"{"n": 65}"#, "n"),
            (r#"{"max_tokens": 0}"#, "max_tokens"),
            (r#"{"top_k": -2}"#, "top_k"),
            (r#"{"top_p": 0}"#, "top_p"),
            (r#"{"temperature": -1}"#, "temperature"),
            (r#"{"presence_penalty": 3}"#, "presence_penalty"),
            (r#"{"min_p": 1.5}"#, "min_p"),
        ] {
            let e = params(json).resolve(&d, None).unwrap_err();
            assert_eq!(e.param, field, "{json}: {e}");
        }
        let e = params("{}").resolve(&d, Some(21)).unwrap_err();
        assert_eq!(e.param, "top_logprobs");
    }

    #[test]
    fn stop_strings_and_logprobs() {
        let spec = params(r#"{"stop": "END", "seed": 7}"#)
            .resolve(&Default::default(), Some(0))
            .unwrap();
        assert_eq!(spec.stop, ["END"]);
        assert_eq!(spec.seed, Some(7));
        assert_eq!(spec.sampling.top_logprobs, 1);
        let spec = params(r#"{"stop": ["a", "b"]}"#)
            .resolve(&Default::default(), None)
            .unwrap();
        assert_eq!(spec.stop, ["a", "b"]);
        assert_eq!(spec.sampling.top_logprobs, 0);
    }
}
