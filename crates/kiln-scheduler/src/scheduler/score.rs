//! Prompt log-probabilities ([`crate::Request::prompt_logprobs`]): the rows of a prefill
//! chunk that score the prompt token after them. Row `p` (for `p < prompt_len - 1`) scores
//! prompt token `p + 1`; `num_scored` rows are done. A scored row takes a row of the sampler
//! as a sampled sequence does, so a step holds at most `max_sampler_rows` of the two together,
//! and a chunk is cut short where its rows would not fit. A token served from the prefix
//! cache has no logits, so such a request takes cached blocks only up to its first row not
//! yet scored (after a preemption, the rows it scored before are recomputed, not re-scored).

use std::ops::Range;

use kiln_core::{BLOCK_SIZE, PromptScore};

use crate::request::RequestState;

impl RequestState {
    /// Prompt rows still to score (empty without prompt logprobs).
    fn rows_to_score(&self) -> Range<usize> {
        match self.req.prompt_logprobs {
            Some(_) => self.num_scored..self.prompt_len() - 1,
            None => 0..0,
        }
    }

    /// The rows of the chunk `start..end` still to score.
    fn scored_in(&self, start: usize, end: usize) -> Range<usize> {
        let r = self.rows_to_score();
        let lo = start.clamp(r.start, r.end);
        lo..end.clamp(lo, r.end)
    }

    /// Whether a chunk ending at `end` samples: it reaches the last token and the request
    /// generates (a request with `max_tokens` 0 only scores its prompt).
    pub fn samples_at(&self, end: usize) -> bool {
        end == self.tokens.len() && self.req.max_tokens > 0
    }

    /// Sampler rows the chunk of `n` tokens from `start` takes: its scored rows, plus one if
    /// it samples.
    pub fn sampler_rows(&self, start: usize, n: usize) -> usize {
        self.scored_in(start, start + n).len() + usize::from(self.samples_at(start + n))
    }

    /// The longest chunk from `start`, of at most `n` tokens, that takes at most `rows`
    /// sampler rows (0: none fits).
    pub fn chunk_within_rows(&self, start: usize, n: usize, rows: usize) -> usize {
        if self.sampler_rows(start, n) <= rows {
            return n;
        }
        // Leave the sampled row to a later step, then cut the scored rows to fit.
        let mut end = start + n - usize::from(self.samples_at(start + n));
        let scored = self.scored_in(start, end);
        if scored.len() > rows {
            end = scored.start + rows;
        }
        end - start
    }

    /// The scored rows of the chunk of `n` tokens from `start`, if any.
    pub fn prompt_score(&self, start: usize, n: usize) -> Option<PromptScore> {
        let rows = self.scored_in(start, start + n);
        (!rows.is_empty()).then(|| PromptScore {
            first_row: (rows.start - start) as u32,
            targets: self.tokens[rows.start + 1..rows.end + 1].to_vec(),
            top_logprobs: self.req.prompt_logprobs.unwrap_or(0),
        })
    }

    /// Most prefix-cache blocks this request may take: at least its last token is computed
    /// when it samples, and no row still to score is skipped.
    pub fn max_hit_blocks(&self) -> usize {
        let computed_from = match self.req.prompt_logprobs {
            Some(_) if self.num_scored < self.prompt_len() - 1 => self.num_scored,
            _ => self.tokens.len() - 1,
        };
        computed_from / BLOCK_SIZE
    }
}
