//! The generation flags `generate` and `chat` share, the CLI's spelling of the request fields
//! the server reads; unset flags take the model's own defaults (its generation config), then
//! kiln's, exactly as a server request does.

use kiln_frontend::{GenerationParams, StopSpec};

#[derive(clap::Args, Clone, Debug)]
pub struct SamplingArgs {
    /// 0 is greedy (default: the model's generation config, else 1).
    #[arg(long)]
    temperature: Option<f32>,
    #[arg(long)]
    top_p: Option<f32>,
    /// -1 or 0: off.
    #[arg(long, allow_hyphen_values = true)]
    top_k: Option<i64>,
    #[arg(long)]
    min_p: Option<f32>,
    #[arg(long)]
    repetition_penalty: Option<f32>,
    #[arg(long, allow_hyphen_values = true)]
    presence_penalty: Option<f32>,
    #[arg(long, allow_hyphen_values = true)]
    frequency_penalty: Option<f32>,
    /// Random seed (default: a random one).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop at this text (not shown); repeat the flag for several.
    #[arg(long)]
    stop: Vec<String>,
    /// Stop at this token id (as at end-of-sequence); repeat the flag for several.
    #[arg(long = "stop-token-id")]
    stop_token_ids: Vec<u32>,
    /// Generate at least this many tokens before any stop (end-of-sequence, stop token or
    /// stop string) may end the reply.
    #[arg(long)]
    min_tokens: Option<i64>,
    /// Keep generating past end-of-sequence tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Write special tokens' text (tool-call markers, say) instead of leaving it out (the
    /// request field `skip_special_tokens: false`).
    #[arg(long)]
    keep_special_tokens: bool,
    /// Most tokens per reply (default: 256, or what the context has room for if less; more
    /// than the room is an error).
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// TOKEN_ID=BIAS: add BIAS (-100 to 100) to that token's logit; repeat the flag for several.
    #[arg(long, value_parser = token_bias, allow_hyphen_values = true)]
    logit_bias: Vec<(String, f32)>,
    /// Sample only this token id; repeat the flag to allow several (default: any).
    #[arg(long = "allowed-token-id")]
    allowed_token_ids: Vec<u32>,
    /// Never write this word (its tokens, with or without a leading space); repeat the flag
    /// for several.
    #[arg(long = "bad-word")]
    bad_words: Vec<String>,
    /// At most this many tokens of reasoning (a `<think>` block, or gpt-oss's `analysis`
    /// messages), after which its closing tag is written for the model; no bound for a
    /// model that does not reason.
    #[arg(long, allow_hyphen_values = true)]
    pub thinking_token_budget: Option<usize>,
}

/// `ID=BIAS` as the request field's key and value (the key is checked as a token id later,
/// as the server checks it).
fn token_bias(s: &str) -> Result<(String, f32), String> {
    let (id, bias) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not TOKEN_ID=BIAS"))?;
    let bias = bias
        .parse()
        .map_err(|_| format!("`{bias}` is not a number"))?;
    Ok((id.to_string(), bias))
}

/// Tokens per reply when `--max-tokens` is not given.
pub const DEFAULT_MAX_TOKENS: usize = 256;

impl SamplingArgs {
    pub fn params(&self) -> GenerationParams {
        GenerationParams {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repetition_penalty: self.repetition_penalty,
            seed: self.seed.map(|s| s as i64),
            n: None,
            stop: (!self.stop.is_empty()).then(|| StopSpec::Many(self.stop.clone())),
            ignore_eos: self.ignore_eos.then_some(true),
            max_tokens: self.max_tokens.map(|m| m as i64),
            cache_salt: None,
            prompt_logprobs: None,
            logit_bias: (!self.logit_bias.is_empty())
                .then(|| self.logit_bias.iter().cloned().collect()),
            skip_special_tokens: self.keep_special_tokens.then_some(false),
            min_tokens: self.min_tokens,
            stop_token_ids: (!self.stop_token_ids.is_empty()).then(|| self.stop_token_ids.clone()),
            include_stop_str_in_output: None,
            priority: None,
            truncate_prompt_tokens: None,
            allowed_token_ids: (!self.allowed_token_ids.is_empty())
                .then(|| self.allowed_token_ids.clone()),
            bad_words: (!self.bad_words.is_empty()).then(|| self.bad_words.clone()),
        }
    }
}
