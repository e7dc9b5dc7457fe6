//! Sampling parameters as the GPU sampler sees them, and what it returns.

use serde::{Deserialize, Serialize};

use crate::PenaltyWrites;

/// How to pick the next token from a row of logits. The defaults sample from the model's full
/// distribution at temperature 1; `temperature == 0` means greedy.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 keeps all.
    pub top_k: u32,
    /// Keep the smallest set of tokens whose probability adds up to at least `top_p`.
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the top token's.
    pub min_p: f32,
    /// Divides positive logits (multiplies negative ones) of tokens seen in prompt or output.
    pub repetition_penalty: f32,
    /// Subtracted once from the logit of every token that appears in the output.
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per time it appears in the output.
    pub frequency_penalty: f32,
    /// Number of most likely tokens to return with their log-probabilities (0: none).
    pub top_logprobs: u32,
    /// Which distribution the reported log-probabilities describe.
    #[serde(default)]
    pub logprobs_mode: LogprobsMode,
}

/// What reported log-probabilities are computed from (vLLM's `--logprobs-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogprobsMode {
    /// The model's own logits, before penalties, temperature and token masks (vLLM's default).
    #[default]
    Raw,
    /// The distribution actually sampled from: after penalties and temperature, masked and
    /// non-finite tokens left out.
    Processed,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            top_logprobs: 0,
            logprobs_mode: LogprobsMode::Raw,
        }
    }
}

impl SamplingParams {
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::default()
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }

    pub fn has_penalties(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
    }

    /// Whether the sampler reports log-probabilities of the raw logits, for which it keeps
    /// each penalised token's raw logit in per-entry scratch of the penalty list.
    pub fn reports_raw_logprobs(&self) -> bool {
        self.logprobs_mode == LogprobsMode::Raw && self.top_logprobs > 0
    }

    /// Checks ranges; the message names the offending parameter.
    pub fn validate(&self) -> Result<(), String> {
        let checks: [(&str, bool, &str); 6] = [
            (
                "temperature",
                self.temperature.is_finite() && self.temperature >= 0.0,
                "must be >= 0",
            ),
            (
                "top_p",
                self.top_p > 0.0 && self.top_p <= 1.0,
                "must be in (0, 1]",
            ),
            (
                "min_p",
                (0.0..=1.0).contains(&self.min_p),
                "must be in [0, 1]",
            ),
            (
                "repetition_penalty",
                self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite(),
                "must be > 0",
            ),
            (
                "presence_penalty",
                (-2.0..=2.0).contains(&self.presence_penalty),
                "must be in [-2, 2]",
            ),
            (
                "frequency_penalty",
                (-2.0..=2.0).contains(&self.frequency_penalty),
                "must be in [-2, 2]",
            ),
        ];
        for (name, ok, why) in checks {
            if !ok {
                return Err(format!("{name} {why}"));
            }
        }
        if self.top_logprobs > 20 {
            return Err("top_logprobs must be at most 20".into());
        }
        Ok(())
    }
}

/// What to sample for one sequence this step.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleSpec {
    pub params: SamplingParams,
    /// The request's seed. With `draw_index`, fixes the random draw: the same seed gives the
    /// same output, whatever else shares the batch.
    pub seed: u64,
    /// Index of the token being drawn within the request's output (0 for the first).
    pub draw_index: u32,
    /// Changes to the sequence's penalty list (distinct tokens of its history, for the
    /// penalties, and its biased tokens), which the runner keeps with the sequence's
    /// block-table row; empty when it has neither.
    pub penalties: PenaltyWrites,
}

/// Allowed tokens of one sampled row: `ceil(vocab / 32)` words, bit `i % 32` of word `i / 32`
/// set when token `i` may be sampled (grammar-constrained decoding).
pub type TokenMask = Vec<u32>;

/// Words of a [`TokenMask`] for a vocabulary of `vocab` tokens.
pub fn mask_words(vocab: usize) -> usize {
    vocab.div_ceil(32)
}

/// One sampled token, returned by the runner for each sequence with a [`SampleSpec`], in order;
/// then, for each scored prompt row, its (forced) target token with its log-probabilities.
#[derive(Clone, Debug, PartialEq)]
pub struct SampledToken {
    pub token_id: u32,
    /// Log-probability of `token_id` (see [`LogprobsMode`]), if top logprobs were asked for.
    pub logprob: Option<f32>,
    /// The most likely tokens with their log-probabilities, most likely first.
    pub top_logprobs: Vec<(u32, f32)>,
    /// For a scored prompt token: its rank by logit in the row (1: the most likely; tokens
    /// tied with it share its rank).
    pub rank: Option<u32>,
    /// The row's final hidden state (after the last norm), where the batch asked for it
    /// ([`crate::StepBatch::hidden_rows`]).
    pub hidden: Option<Vec<f32>>,
}
