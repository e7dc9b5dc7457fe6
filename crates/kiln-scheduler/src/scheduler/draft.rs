//! Speculative decoding in the scheduler: a step's decodes take guesses of their next tokens
//! (`speculation.rs`) from what is left of the step's limits, and the step's draws keep the
//! guesses the model confirms.
//!
//! Guesses come after every running request is planned and before waiting requests are
//! admitted; each takes a token of the budget and a sampler row, and the blocks for its
//! position where the pool has them free (never preempting). The runner samples every row of
//! a decode with guesses ([`kiln_core::SeqInBatch::drafts`]). [`Scheduler::resolve`] then
//! keeps the first draw and, while the draw before it equals the guess that was its row's
//! input, each next one ([`accepted`]); the request advances by the tokens kept and gives
//! back the blocks it took for guesses that were not. A step with guesses is never
//! overlapped with the next (which could only guess once this one's tokens are known).

use kiln_core::{BLOCK_SIZE, SampledToken};

use super::step::{Budget, Planned};
use super::{Scheduler, blocks_for};
use crate::output::FinishReason;
use crate::request::RequestState;

impl Scheduler {
    /// Gives the planned decodes of requests that may speculate their guesses, within
    /// `budget` and the free blocks. O(planned decodes * history).
    pub(super) fn add_drafts(&mut self, plan: &mut [Planned], budget: &mut Budget) {
        let Some(spec) = self.cfg.speculation else {
            return;
        };
        for p in plan.iter_mut() {
            let st = self.requests.get_mut(&p.id).unwrap();
            let start = st.num_computed;
            if p.tokens != 1 || !st.samples_at(start + 1) {
                continue;
            }
            let limit = (st.draft_limit(self.max_len))
                .min(spec.num_tokens)
                .min(budget.tokens)
                .min(budget.rows);
            let mut guesses = spec.propose(&st.tokens, limit).to_vec();
            let need = blocks_for(start + 1 + guesses.len()).saturating_sub(st.blocks.len());
            if need > 0 {
                match self.kv.allocate(need) {
                    Some(new) => st.blocks.extend(new),
                    // Only as many as the blocks it holds have room for.
                    None => guesses.truncate(st.blocks.len() * BLOCK_SIZE - start - 1),
                }
            }
            let k = guesses.len();
            st.drafts = guesses;
            p.tokens += k;
            p.rows += k;
            budget.tokens -= k;
            budget.rows -= k;
            self.stats.spec_draft_tokens += k as u64;
        }
    }

    /// Gives back the blocks a request took for guesses beyond what it computed.
    pub(super) fn trim_to_computed(&mut self, id: u64) {
        let st = self.requests.get_mut(&id).unwrap();
        let keep = blocks_for(st.num_computed);
        if st.blocks.len() > keep {
            self.kv.release(&st.blocks[keep..]);
            st.blocks.truncate(keep);
        }
    }
}

/// The draws a request keeps from its rows of a step, and how it ends with them: the first
/// draw fills its placeholder; each next one is kept while the draw before it equals the
/// guess that was its row's input (`guesses`), up to a draw that ends the request.
pub(super) fn accepted(
    st: &mut RequestState,
    drawn: Vec<SampledToken>,
    guesses: &[u32],
    max_len: usize,
) -> (Vec<SampledToken>, Option<FinishReason>) {
    let mut drawn = drawn.into_iter();
    let Some(first) = drawn.next() else {
        return (Vec::new(), st.finishing);
    };
    let mut finished = if st.resolve_pending(first.token_id) {
        Some(FinishReason::Stop)
    } else {
        st.finishing
    };
    let mut kept = vec![first];
    if st.table.row().is_none() {
        // Preempted meanwhile: it recomputes its history and draws the rest again.
        return (kept, finished);
    }
    for (t, &guess) in drawn.zip(guesses) {
        if finished.is_some() || kept.last().unwrap().token_id != guess {
            break;
        }
        finished = st.append_confirmed(t.token_id, max_len);
        kept.push(t);
    }
    (kept, finished)
}
