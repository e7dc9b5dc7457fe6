//! A step's results in two halves, so that the next step can be scheduled while it runs.
//!
//! [`Scheduler::commit`] needs no token: it advances every request of the step by the tokens
//! the step computes and gives each sampled request a placeholder for the token it is drawing
//! (`RequestState::pending_row`: its row of the step's sampler). A request that reaches its
//! `max_tokens` or length limit with that token leaves the running queue at once (it is
//! *finishing*, keeping its blocks). The next [`Scheduler::schedule`] sees every request where
//! it will be after the step: a decode whose input is a placeholder takes its token from the
//! previous step's output on the GPU ([`kiln_core::PrevToken`]), so the engine can submit that
//! step before this one's tokens reach the host.
//!
//! [`Scheduler::resolve`], with the tokens, fills the placeholders, finishes requests that
//! sampled a stop token (their row in a step scheduled meanwhile is wasted, its output
//! skipped: the request is gone by then) and those finishing, and only then registers newly
//! computed blocks in the prefix cache and gives back blocks behind a sliding window, so a
//! step that fails after its commit leaves no block of its own in the cache.
//!
//! Order: `schedule`, `commit`, then `schedule` of the next step (optional), `resolve` of the
//! first, `commit` of the second, and so on; `update` is `commit` and `resolve` together.
//! The penalty list of a request whose last token is pending leaves that token out; the
//! sampler counts it from the step's inputs. Cost: O(step sequences) each, plus the
//! prefix-cache registrations.

use kiln_core::{BLOCK_SIZE, SampledToken};

use super::{Scheduler, draft, window};
use crate::kv_cache::KvCache;
use crate::output::{FinishReason, RequestUpdate, ScheduledStep};
use crate::prefix_hash::{NewBlock, Registered};
use crate::request::RequestState;

impl Scheduler {
    /// Applies what `step` computes before its tokens are known. Panics unless `step` is the
    /// scheduled step and the step before it has been resolved.
    pub fn commit(&mut self, step: &mut ScheduledStep) {
        assert!(
            self.scheduled && !step.committed,
            "commit() of a step that is not the scheduled one"
        );
        assert!(
            !self.unresolved,
            "commit() before the previous step was resolved"
        );
        self.scheduled = false;
        self.unresolved = true;
        step.committed = true;
        let mut rows = 0u32;
        for s in &step.seqs {
            // A decode with guesses takes a row for each; its placeholder is the first's.
            let row = s.sampled.then(|| {
                rows += 1 + s.drafts as u32;
                rows - 1 - s.drafts as u32
            });
            let Some(st) = self.requests.get_mut(&s.id) else {
                continue;
            };
            assert_eq!(
                st.num_computed, s.num_computed_before,
                "request {} changed during the step",
                s.id
            );
            // Guesses count as computed only once confirmed (`resolve`).
            st.num_computed += s.num_tokens - s.drafts;
            st.num_scored += s.scored;
            st.guessing = s.drafts > 0;
            let ends = match row {
                Some(row) => st.append_pending(row, self.max_len),
                // A request that only scores its prompt ends with it.
                None if st.num_computed == st.tokens.len() => Some(FinishReason::Length),
                None => None,
            };
            if ends.is_some() {
                st.finishing = ends;
                self.rows.release(&mut st.table);
                self.running.retain(|&x| x != s.id);
            }
        }
    }

    /// Applies the tokens of the committed step (see [`Self::update`] for `sampled`) and
    /// returns the updates. Panics unless `step` is the committed, unresolved step.
    pub fn resolve(&mut self, step: ScheduledStep, sampled: &[SampledToken]) -> Vec<RequestUpdate> {
        assert!(
            self.unresolved && step.committed,
            "resolve() of a step that is not the committed one"
        );
        self.unresolved = false;
        let expected: usize = (step.seqs.iter().filter(|s| s.sampled))
            .map(|s| 1 + s.drafts)
            .sum();
        let scored: usize = step.seqs.iter().map(|s| s.scored).sum();
        assert_eq!(
            sampled.len(),
            expected + scored,
            "runner returned {} tokens for {expected} samples and {scored} scored rows",
            sampled.len()
        );
        let (sampled, scored) = sampled.split_at(expected);
        let (mut tokens, mut scored) = (sampled.iter(), scored.iter());
        let mut updates = Vec::new();
        for (s, seq) in step.seqs.iter().zip(&step.batch.seqs) {
            let rows = if s.sampled { 1 + s.drafts } else { 0 };
            let drawn: Vec<SampledToken> = tokens.by_ref().take(rows).cloned().collect();
            let prompt_logprobs: Vec<SampledToken> =
                scored.by_ref().take(s.scored).cloned().collect();
            let Some(st) = self.requests.get_mut(&s.id) else {
                continue;
            };
            st.guessing = false;
            // The guesses were the inputs of the segment's last rows.
            let end = (seq.query_start + seq.query_len) as usize;
            let guesses = &step.batch.token_ids[end - s.drafts..end];
            let (kept, finished) = draft::accepted(st, drawn, guesses, self.max_len);
            if s.drafts > 0 {
                self.stats.spec_accepted_tokens += kept.len() as u64 - 1;
                self.trim_to_computed(s.id);
            }
            let st = self.requests.get_mut(&s.id).unwrap();
            if self.cfg.enable_prefix_caching {
                register_computed(&mut self.kv, st);
            }
            if let Some(w) = self.cfg.sliding_window {
                self.stats.window_released_blocks +=
                    window::release_behind_window(&mut self.kv, st, w) as u64;
            }
            if kept.is_empty() && prompt_logprobs.is_empty() && finished.is_none() {
                continue;
            }
            // One update per kept token (or one without, for scores or a finish), in order;
            // the last says how the request ended.
            let n = kept.len().max(1);
            let (mut kept, mut prompt_logprobs) = (kept.into_iter(), Some(prompt_logprobs));
            for i in 0..n {
                let ends = if i + 1 == n { finished } else { None };
                updates.push(RequestUpdate {
                    id: s.id,
                    token: kept.next(),
                    prompt_logprobs: prompt_logprobs.take().unwrap_or_default(),
                    finished: ends,
                    ended_by_token: ends == Some(FinishReason::Stop),
                    num_cached_tokens: st.num_cached_tokens.unwrap_or(0),
                });
            }
            if finished.is_some() {
                self.finish(s.id);
            }
        }
        updates
    }

    /// Whether a step is committed and waiting for its tokens.
    pub fn unresolved(&self) -> bool {
        self.unresolved
    }
}

/// Registers the request's newly computed full blocks in the prefix cache.
fn register_computed(kv: &mut KvCache, st: &mut RequestState) {
    if st.chain_broken {
        return;
    }
    st.update_keys();
    let full = st.num_computed / BLOCK_SIZE;
    while st.chain.len() < full {
        let i = st.chain.len();
        let parent = i.checked_sub(1).map(|p| st.chain[p]);
        let parent_key = i.checked_sub(1).map(|p| st.keys[p]);
        let tokens = &st.tokens[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
        let block = NewBlock {
            key: st.keys[i],
            parent,
            parent_key,
            tokens,
            salt: st.salt.as_ref(),
            lora: st.req.lora.map(|l| l.id),
        };
        match kv.register(block, st.blocks[i]) {
            Registered::New(id) | Registered::Duplicate(id) => st.chain.push(id),
            Registered::Collision => {
                st.chain_broken = true;
                return;
            }
        }
    }
}
