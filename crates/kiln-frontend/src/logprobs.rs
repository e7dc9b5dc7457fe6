//! Log-probabilities as OpenAI's APIs ask for and write them, for the server and the browser
//! alike: chat's `logprobs` / `top_logprobs` pair, and a sampled token's entry with its
//! alternatives.

use kiln_model::Tokenizer;
use serde_json::{Value, json};

use crate::ParamError;

/// Chat's `logprobs` (a flag) and `top_logprobs` (alternatives per token) as the number of
/// alternatives to report, `None` for no log-probabilities. `top_logprobs` needs `logprobs`.
pub fn chat_logprobs(logprobs: Option<bool>, top: Option<u32>) -> Result<Option<u32>, ParamError> {
    match (logprobs.unwrap_or(false), top) {
        (true, t) => Ok(Some(t.unwrap_or(0))),
        (false, Some(t)) if t > 0 => Err(ParamError::new(
            "top_logprobs",
            "top_logprobs requires logprobs to be true",
        )),
        (false, _) => Ok(None),
    }
}

/// A token's text for log-probabilities (special tokens included).
pub fn token_text(tok: &Tokenizer, id: u32) -> String {
    tok.decode(&[id], false).unwrap_or_default()
}

/// How log-probabilities name a token: its text, or `token_id:{id}` when the request set
/// `return_tokens_as_token_ids`.
pub fn token_name(tok: &Tokenizer, id: u32, as_ids: bool) -> String {
    if as_ids {
        format!("token_id:{id}")
    } else {
        token_text(tok, id)
    }
}

/// A sampled token's log-probability as OpenAI writes it (chat's `logprobs.content`, the
/// Responses API's `output_text.logprobs`): token, log-probability, UTF-8 bytes, and its
/// alternatives `top` in the same form.
pub fn logprob_entry(
    tok: &Tokenizer,
    (id, logprob): (u32, f32),
    top: &[(u32, f32)],
    as_ids: bool,
) -> Value {
    let entry = |id: u32, lp: f32| {
        let t = token_text(tok, id);
        json!({"token": token_name(tok, id, as_ids), "logprob": lp, "bytes": t.as_bytes()})
    };
    let mut e = entry(id, logprob);
    e["top_logprobs"] = top.iter().map(|&(id, lp)| entry(id, lp)).collect();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_logprobs_needs_logprobs() {
        assert_eq!(chat_logprobs(None, None).unwrap(), None);
        assert_eq!(chat_logprobs(Some(false), Some(0)).unwrap(), None);
        assert_eq!(chat_logprobs(Some(true), None).unwrap(), Some(0));
        assert_eq!(chat_logprobs(Some(true), Some(3)).unwrap(), Some(3));
        let e = chat_logprobs(Some(false), Some(2)).unwrap_err();
        assert_eq!(e.param, "top_logprobs");
    }
}
