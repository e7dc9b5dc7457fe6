//! The request log, as vLLM's flags ask for it: each generation request's prompt and
//! parameters when it is queued (`--enable-log-requests`), and each sequence's output when it
//! ends (`--enable-log-outputs`), prompts and outputs cut to `--max-log-len` characters (and
//! prompt token ids to as many ids). Off by default: prompts are users' data.

use kiln_frontend::GenSpec;
use kiln_model::Tokenizer;

#[derive(Clone, Debug, Default)]
pub struct RequestLog {
    /// Log each request when it is queued.
    pub requests: bool,
    /// Log each sequence's output when it ends.
    pub outputs: bool,
    /// Characters of text (and token ids) shown at most; `None`: all.
    pub max_len: Option<usize>,
}

impl RequestLog {
    /// Logs a request queued as the sequences `ids`.
    pub(crate) fn request(
        &self,
        ids: impl Iterator<Item = u64>,
        prompt: &[u32],
        tokenizer: &Tokenizer,
        max_tokens: usize,
        spec: &GenSpec,
    ) {
        if !self.requests {
            return;
        }
        let ids: Vec<u64> = ids.collect();
        let text = tokenizer.decode(prompt, false).unwrap_or_default();
        let shown_ids = &prompt[..self.max_len.map_or(prompt.len(), |m| m.min(prompt.len()))];
        let more = if shown_ids.len() < prompt.len() {
            " ..."
        } else {
            ""
        };
        let sampling = serde_json::to_string(&spec.sampling).unwrap_or_default();
        let seed = spec.seed.map_or("random".into(), |s| s.to_string());
        let lora = spec
            .lora
            .map_or(String::new(), |l| format!(", LoRA adapter {}", l.id));
        tracing::info!(
            "request {ids:?}: prompt {:?}, prompt_token_ids {shown_ids:?}{more} ({} tokens), max_tokens {max_tokens}, seed {seed}, stop {:?}, sampling {sampling}{lora}",
            self.cut(&text),
            prompt.len(),
            spec.stop,
        );
    }

    /// Logs the output of sequence `id`, ended as `how` after `tokens` tokens.
    pub(crate) fn output(&self, id: u64, how: &str, tokens: usize, text: &str) {
        if self.outputs {
            tracing::info!(
                "output of {id} ({how}, {tokens} tokens): {:?}",
                self.cut(text)
            );
        }
    }

    /// `text` cut to the most characters shown, marked where cut.
    fn cut(&self, text: &str) -> String {
        match self.max_len {
            Some(m) if text.chars().count() > m => {
                let head: String = text.chars().take(m).collect();
                format!("{head}...")
            }
            _ => text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_to_the_most_shown() {
        let log = RequestLog {
            max_len: Some(3),
            ..RequestLog::default()
        };
        assert_eq!(log.cut("héllo"), "hél...");
        assert_eq!(log.cut("hé"), "hé");
        assert_eq!(RequestLog::default().cut("hello"), "hello");
    }
}
