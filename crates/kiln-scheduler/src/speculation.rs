//! Speculative decoding by prompt lookup: guesses of a decode's next tokens, taken from the
//! request's own history.
//!
//! Output often repeats what came before: an agent's edit quotes the file it was shown, a
//! JSON reply repeats keys, a summary copies phrases. When the last `n` tokens of a request
//! occurred earlier in its prompt or output, the tokens that followed them then are likely to
//! follow now. A decode carries up to `num_tokens` such guesses after its input; the forward
//! pass computes all of them at once (on a GPU, decode reads every weight once per step
//! whatever the number of rows, so the guesses cost little), and the sampler draws a token
//! at every row.
//!
//! Acceptance keeps the output distribution exact. Row `i` draws the token at output
//! position `j + i` as a plain step would (same logits, given the guesses before it as
//! input; same seeded draw). Its token is kept when every guess before it equals the token
//! drawn at the row before; so the first drawn token is always kept, and each guess that
//! the model would have drawn anyway lets one more row through. The tokens kept are the
//! tokens the request would have produced one step at a time, greedy or sampled with a
//! seed; what a wrong guess costs is its row's compute.

use kiln_core::MAX_DRAFTS;

/// Prompt lookup settings (vLLM's `ngram` method: `num_speculative_tokens`,
/// `prompt_lookup_min`, `prompt_lookup_max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Speculation {
    /// Most guesses a decode carries.
    pub num_tokens: usize,
    /// Shortest suffix of the history looked up.
    pub lookup_min: usize,
    /// Longest suffix looked up; longer matches are tried first.
    pub lookup_max: usize,
}

impl Speculation {
    /// Up to `num_tokens` guesses, looking up the last 4 down to 2 tokens (the defaults of
    /// `kiln`'s `--prompt-lookup-max` and `--prompt-lookup-min`, taken from here).
    pub fn prompt_lookup(num_tokens: usize) -> Speculation {
        Speculation {
            num_tokens,
            lookup_min: 2,
            lookup_max: 4,
        }
    }

    /// Checks the settings; the message names the one that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.num_tokens == 0 || self.num_tokens > MAX_DRAFTS as usize {
            return Err(format!(
                "the number of speculative tokens must be 1 to {MAX_DRAFTS}, not {}",
                self.num_tokens
            ));
        }
        if self.lookup_min == 0 || self.lookup_min > self.lookup_max {
            return Err(format!(
                "prompt lookup needs 1 <= min ({}) <= max ({})",
                self.lookup_min, self.lookup_max
            ));
        }
        Ok(())
    }

    /// Up to `limit` tokens that followed the latest earlier occurrence of the history's last
    /// `n` tokens, for the largest `n` in `lookup_min..=lookup_max` that occurs earlier
    /// (empty if none does). One pass back over the history, comparing one token at each
    /// position and more only where it matches the last: O(history) in the worst case, and
    /// it stops at the latest occurrence of the longest run.
    pub fn propose<'a>(&self, history: &'a [u32], limit: usize) -> &'a [u32] {
        let len = history.len();
        let longest = self.lookup_max.min(len.saturating_sub(1));
        if limit == 0 || longest < self.lookup_min {
            return &[];
        }
        let last = history[len - 1];
        // (run length, end of the occurrence): the longest found so far, the latest on ties.
        let mut best = (0, 0);
        // An occurrence ends at `end` (exclusive), before the last token, so a token follows.
        for end in ends_of(&history[..len - 1], last) {
            let run = (1..=longest)
                .take_while(|&n| n <= end && history[end - n] == history[len - n])
                .count();
            if run > best.0 {
                best = (run, end);
                if run == longest {
                    break;
                }
            }
        }
        match best {
            (run, end) if run >= self.lookup_min => &history[end..(end + limit).min(len)],
            _ => &[],
        }
    }
}

/// The positions just past each occurrence of `token` in `hay`, latest first. Blocks of 16
/// are tested with one branch-free comparison each (which the compiler vectorizes), so a
/// token that occurs once in a few hundred costs about a compare per position.
fn ends_of(hay: &[u32], token: u32) -> impl Iterator<Item = usize> + '_ {
    const BLOCK: usize = 16;
    let whole = hay.len() / BLOCK * BLOCK;
    let tail = (whole..hay.len()).rev();
    let blocks = (0..whole / BLOCK).rev().flat_map(move |b| {
        let block = &hay[b * BLOCK..(b + 1) * BLOCK];
        let any = block.iter().fold(false, |a, &t| a | (t == token));
        let first = b * BLOCK;
        (first..if any { first + BLOCK } else { first }).rev()
    });
    tail.chain(blocks)
        .filter(move |&i| hay[i] == token)
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOKUP: Speculation = Speculation {
        num_tokens: 4,
        lookup_min: 2,
        lookup_max: 3,
    };

    #[test]
    fn proposes_what_followed_the_latest_longest_match() {
        // "1 2 3" occurred at 0 (followed by 9) and "2 3" later at 5 (followed by 7 8): the
        // 3-token match wins although the 2-token one is later.
        let h = [1, 2, 3, 9, 4, 2, 3, 7, 8, 1, 2, 3];
        assert_eq!(LOOKUP.propose(&h, 4), &[9, 4, 2, 3]);
        assert_eq!(LOOKUP.propose(&h, 2), &[9, 4]);
        // Only "2 3" matches: the latest occurrence is at 5.
        let h = [2, 3, 9, 4, 2, 3, 7, 8, 5, 2, 3];
        assert_eq!(LOOKUP.propose(&h, 4), &[7, 8, 5, 2]);
    }

    #[test]
    fn stops_at_the_end_of_the_history_and_finds_overlaps() {
        // "5 5" occurs earlier only at 0, overlapping the suffix: the last token follows it.
        let h = [5, 5, 5];
        assert_eq!(LOOKUP.propose(&h, 4), &[5]);
        let h = [1, 2, 8, 1, 2];
        assert_eq!(LOOKUP.propose(&h, 4), &[8, 1, 2]);
    }

    #[test]
    fn proposes_nothing_without_a_match_or_room() {
        assert!(LOOKUP.propose(&[1, 2, 3, 4], 4).is_empty());
        assert!(LOOKUP.propose(&[1], 4).is_empty());
        assert!(LOOKUP.propose(&[], 4).is_empty());
        assert!(LOOKUP.propose(&[1, 2, 1, 2], 0).is_empty());
        // A single repeated token is below the shortest lookup.
        assert!(LOOKUP.propose(&[7, 1, 7], 4).is_empty());
    }

    /// The definition, one suffix length at a time.
    fn plain<'a>(s: &Speculation, history: &'a [u32], limit: usize) -> &'a [u32] {
        let len = history.len();
        for n in (s.lookup_min..=s.lookup_max.min(len.saturating_sub(1))).rev() {
            let suffix = &history[len - n..];
            if let Some(at) = history[..len - 1].windows(n).rposition(|w| w == suffix) {
                return &history[at + n..(at + n + limit).min(len)];
            }
        }
        &[]
    }

    #[test]
    fn agrees_with_the_definition_on_random_histories() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % below
        };
        for _ in 0..3000 {
            let s = Speculation {
                num_tokens: 5,
                lookup_min: 1 + next(3) as usize,
                lookup_max: 3 + next(3) as usize,
            };
            // A small alphabet, so runs repeat.
            let alphabet = 2 + next(6);
            let history: Vec<u32> = (0..next(60)).map(|_| next(alphabet) as u32).collect();
            let limit = next(7) as usize;
            assert_eq!(
                s.propose(&history, limit),
                plain(&s, &history, limit),
                "{s:?} {history:?} {limit}"
            );
        }
    }

    #[test]
    fn checks_its_settings() {
        assert!(LOOKUP.validate().is_ok());
        assert!(
            Speculation::prompt_lookup(MAX_DRAFTS as usize)
                .validate()
                .is_ok()
        );
        let too_many = MAX_DRAFTS as usize + 1;
        let bad = [(0, 1, 2), (too_many, 1, 2), (3, 0, 2), (3, 3, 2)];
        for (num_tokens, lookup_min, lookup_max) in bad {
            let s = Speculation {
                num_tokens,
                lookup_min,
                lookup_max,
            };
            assert!(s.validate().is_err(), "{s:?}");
        }
    }
}
