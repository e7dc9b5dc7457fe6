//! A request's penalty list (the tokens whose logits the sampler changes:
//! [`kiln_core::PenaltyWrites`]), kept up to date as its tokens become known instead of
//! counted from the whole history at every step, remembering which entries changed so that a
//! step sends only those ([`crate::table_rows::TableSync::penalty_writes`]).
//!
//! Cost: O(new tokens) to catch up and to send.

use std::collections::HashMap;

use kiln_core::PenaltyToken;

/// The bias that keeps a token from being sampled while it is banned (vLLM's `min_tokens`
/// bans end-of-sequence and stop tokens): finite, so a row whose every token is masked by a
/// grammar still has a largest logit.
pub const BANNED: f32 = -1.0e9;

#[derive(Debug, Default)]
pub(crate) struct PenaltyList {
    /// Biased tokens first, then history tokens by first appearance.
    entries: Vec<PenaltyToken>,
    /// Banned entries (by index) and the bias each goes back to when the ban is lifted.
    banned: Vec<(usize, f32)>,
    /// Index in `entries` of each token.
    index: HashMap<u32, usize>,
    /// Tokens of the history counted so far.
    counted: usize,
    /// Indices of entries counted since [`Self::take_changed`] (with repeats).
    changed: Vec<u32>,
}

impl PenaltyList {
    /// A list holding the request's biased tokens (distinct ids).
    pub fn new(logit_bias: &[(u32, f32)]) -> Self {
        let mut list = Self::default();
        for &(token_id, bias) in logit_bias {
            let i = list.entry(token_id);
            list.entries[i].bias = bias;
        }
        list
    }

    /// Bans `tokens` (their bias becomes [`BANNED`]) until [`Self::lift_ban`].
    pub fn ban(&mut self, tokens: &[u32]) {
        for &t in tokens {
            let i = self.entry(t);
            if self.banned.iter().all(|&(b, _)| b != i) {
                self.banned.push((i, self.entries[i].bias));
                self.entries[i].bias = BANNED;
                self.changed.push(i as u32);
            }
        }
    }

    /// Gives the banned tokens their own biases back.
    pub fn lift_ban(&mut self) {
        for (i, bias) in std::mem::take(&mut self.banned) {
            self.entries[i].bias = bias;
            self.changed.push(i as u32);
        }
    }

    pub fn is_banning(&self) -> bool {
        !self.banned.is_empty()
    }

    fn entry(&mut self, token_id: u32) -> usize {
        *self.index.entry(token_id).or_insert_with(|| {
            self.entries.push(PenaltyToken {
                token_id,
                output_count: 0,
                seen: false,
                bias: 0.0,
            });
            self.entries.len() - 1
        })
    }

    /// Counts `history[counted..]`: tokens before `prompt_len` as seen, later ones as seen
    /// and output. `history` only ever grows.
    pub fn catch_up(&mut self, history: &[u32], prompt_len: usize) {
        for (p, &token_id) in history.iter().enumerate().skip(self.counted) {
            let i = self.entry(token_id);
            let e = &mut self.entries[i];
            let output = p >= prompt_len;
            if output || !e.seen {
                e.seen = true;
                e.output_count += u32::from(output);
                self.changed.push(i as u32);
            }
        }
        self.counted = history.len();
    }

    pub fn entries(&self) -> &[PenaltyToken] {
        &self.entries
    }

    /// Indices of the entries changed by counting since the last call, each once, in order.
    pub fn take_changed(&mut self) -> Vec<u32> {
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ban_holds_until_lifted_and_restores_the_bias() {
        let mut list = PenaltyList::new(&[(7, 1.5)]);
        list.take_changed();
        list.ban(&[7, 2, 2]);
        let bias =
            |l: &PenaltyList, t: u32| l.entries().iter().find(|e| e.token_id == t).unwrap().bias;
        assert_eq!((bias(&list, 7), bias(&list, 2)), (BANNED, BANNED));
        assert_eq!(list.take_changed(), [0, 1]);
        list.catch_up(&[2, 5], 1);
        list.take_changed();
        list.lift_ban();
        assert!(!list.is_banning());
        assert_eq!((bias(&list, 7), bias(&list, 2)), (1.5, 0.0));
        assert_eq!(
            list.take_changed(),
            [0, 1],
            "the lifted entries are sent again"
        );
        let e = list.entries()[1];
        assert_eq!((e.output_count, e.seen), (0, true), "counts are kept");
    }

    #[test]
    fn counts_match_a_recount_of_the_whole_history() {
        let bias = [(7, 1.5), (300, -2.0)];
        let history: Vec<u32> = (0..200).map(|i| (i * i + 3) % 37).collect();
        let prompt_len = 60;
        let mut list = PenaltyList::new(&bias);
        list.take_changed();
        let mut before = list.entries().to_vec();
        for end in [0, 1, 59, 60, 61, 130, 200] {
            list.catch_up(&history[..end], prompt_len);
            // The entries reported changed are exactly those that differ or are new.
            let moved: Vec<u32> = (0..list.entries().len() as u32)
                .filter(|&i| before.get(i as usize) != Some(&list.entries()[i as usize]))
                .collect();
            let changed = list.take_changed();
            assert_eq!(changed, moved, "after {end} tokens");
            assert!(changed.windows(2).all(|w| w[0] < w[1]));
            before = list.entries().to_vec();
            let mut got = list.entries().to_vec();
            got.sort_by_key(|e| e.token_id);
            let mut want: Vec<PenaltyToken> = Vec::new();
            let ids = (history[..end].iter()).chain(bias.iter().map(|b| &b.0));
            let mut ids: Vec<u32> = ids.copied().collect();
            ids.sort();
            ids.dedup();
            for id in ids {
                let at =
                    |r: std::ops::Range<usize>| history[r].iter().filter(|&&t| t == id).count();
                want.push(PenaltyToken {
                    token_id: id,
                    output_count: at(prompt_len.min(end)..end) as u32,
                    seen: at(0..end) > 0,
                    bias: bias.iter().find(|b| b.0 == id).map_or(0.0, |b| b.1),
                });
            }
            assert_eq!(got, want, "after {end} tokens");
        }
    }
}
