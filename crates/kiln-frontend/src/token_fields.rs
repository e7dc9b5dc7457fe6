//! The request fields that name tokens (`logit_bias`, `stop_token_ids`, `allowed_token_ids`,
//! `bad_words`): read, checked against the model's vocabulary, and turned into the engine's
//! terms. [`Frontend::resolve`] is where every front end turns a request's knobs into a
//! [`GenSpec`].

use crate::{Frontend, GenSpec, GenerationParams, ParamError};

impl GenerationParams {
    /// `logit_bias` as (id, bias) pairs, sorted by id.
    pub(crate) fn logit_bias_ids(&self) -> Result<Vec<(u32, f32)>, ParamError> {
        let mut logit_bias = Vec::new();
        for (key, &bias) in self.logit_bias.iter().flatten() {
            let Ok(id) = key.parse::<u32>() else {
                return Err(ParamError::new(
                    "logit_bias",
                    format!("logit_bias keys must be token ids, not `{key}`"),
                ));
            };
            if !(-100.0..=100.0).contains(&bias) {
                return Err(ParamError::new(
                    "logit_bias",
                    format!("the bias of token {id} must be between -100 and 100, not {bias}"),
                ));
            }
            logit_bias.push((id, bias));
        }
        logit_bias.sort_by_key(|&(id, _)| id);
        if let Some(w) = logit_bias.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ParamError::new(
                "logit_bias",
                format!("token {} is biased twice", w[0].0),
            ));
        }
        Ok(logit_bias)
    }

    /// `allowed_token_ids`, sorted and distinct.
    pub(crate) fn allowed_ids(&self) -> Result<Option<Vec<u32>>, ParamError> {
        let Some(ids) = &self.allowed_token_ids else {
            return Ok(None);
        };
        if ids.is_empty() {
            return Err(ParamError::new(
                "allowed_token_ids",
                "allowed_token_ids must name at least one token (or be left out)",
            ));
        }
        let mut ids = ids.clone();
        ids.sort_unstable();
        ids.dedup();
        Ok(Some(ids))
    }
}

impl Frontend {
    /// Checks a request's generation knobs and fills the unset ones from the model's
    /// defaults, then kiln's; checks the tokens they name against the vocabulary and
    /// tokenizes `bad_words`. `logprobs`: top log-probabilities per token, when asked.
    pub fn resolve(
        &self,
        params: &GenerationParams,
        logprobs: Option<u32>,
    ) -> Result<GenSpec, ParamError> {
        let mut spec = params.resolve(&self.defaults, logprobs)?;
        self.check_tokens(&spec)?;
        spec.filter.banned = self.bad_word_tokens(params.bad_words.as_deref().unwrap_or(&[]))?;
        Ok(spec)
    }

    /// Checks that the tokens `spec` names (biased ones, stop token ids, allowed ones) are in
    /// the vocabulary.
    fn check_tokens(&self, spec: &GenSpec) -> Result<(), ParamError> {
        let named = (spec.logit_bias.iter().map(|&(t, _)| ("logit_bias", t)))
            .chain(spec.stop_token_ids.iter().map(|&t| ("stop_token_ids", t)))
            .chain(
                spec.filter
                    .allowed
                    .iter()
                    .flatten()
                    .map(|&t| ("allowed_token_ids", t)),
            );
        for (param, t) in named {
            if t as usize >= self.vocab_size {
                return Err(ParamError::new(
                    param,
                    format!(
                        "token id {t} is out of the vocabulary (size {})",
                        self.vocab_size
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The token sequences of `words`, each as written (less leading whitespace) and after
    /// a space, as a word inside a sentence is tokenized; sorted and distinct.
    fn bad_word_tokens(&self, words: &[String]) -> Result<Vec<Vec<u32>>, ParamError> {
        let mut banned = Vec::new();
        for w in words {
            let w = w.trim_start();
            if w.is_empty() {
                return Err(ParamError::new(
                    "bad_words",
                    "bad_words entries must not be empty or only whitespace",
                ));
            }
            for text in [w.to_string(), format!(" {w}")] {
                banned.push(self.encode(&text, false, "bad_words")?);
            }
        }
        banned.retain(|s| !s.is_empty());
        banned.sort();
        banned.dedup();
        Ok(banned)
    }
}
