//! [`TokenFilter`]: tokens a request never samples, whatever their logits (vLLM's
//! `allowed_token_ids` and `bad_words`). The front ends build it from a request; the engine
//! applies it to the sampled row's [`TokenMask`] each step, beside any grammar: the allow
//! list's mask (made once) and the bans the output's last tokens call for.

use crate::TokenMask;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenFilter {
    /// Only these tokens may be sampled (sorted, distinct); `None`: any token.
    pub allowed: Option<Vec<u32>>,
    /// Token sequences the output never ends with: a sequence's last token is masked
    /// whenever the output so far ends with the tokens before it (a one-token sequence is
    /// masked always).
    pub banned: Vec<Vec<u32>>,
}

impl TokenFilter {
    /// Whether the filter lets every token through.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_none() && self.banned.is_empty()
    }

    /// How many of the output's last tokens [`TokenFilter::ban`] reads.
    pub fn context(&self) -> usize {
        self.banned
            .iter()
            .map(|s| s.len().saturating_sub(1))
            .max()
            .unwrap_or(0)
    }

    /// The tokens the allow list lets through, as a mask of `words` words; `None`: all.
    pub fn allowed_mask(&self, words: usize) -> Option<TokenMask> {
        let allowed = self.allowed.as_ref()?;
        let mut keep = vec![0u32; words];
        for &t in allowed {
            if let Some(w) = keep.get_mut(t as usize / 32) {
                *w |= 1 << (t % 32);
            }
        }
        Some(keep)
    }

    /// Clears from `mask` the banned sequences' last tokens that would complete them after
    /// an output that ends with `recent` (its last [`TokenFilter::context`] tokens, or all of
    /// it when shorter).
    pub fn ban(&self, mask: &mut TokenMask, recent: &[u32]) {
        for seq in &self.banned {
            let Some((&last, before)) = seq.split_last() else {
                continue;
            };
            if recent.ends_with(before)
                && let Some(w) = mask.get_mut(last as usize / 32)
            {
                *w &= !(1 << (last % 32));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask_words;

    /// `mask` less what `f` forbids after `recent`.
    fn restrict(f: &TokenFilter, mask: &mut TokenMask, recent: &[u32]) {
        if let Some(keep) = f.allowed_mask(mask.len()) {
            mask.iter_mut().zip(keep).for_each(|(m, k)| *m &= k);
        }
        f.ban(mask, recent);
    }

    fn allowed(mask: &TokenMask) -> Vec<u32> {
        (0..mask.len() as u32 * 32)
            .filter(|&t| mask[t as usize / 32] & (1 << (t % 32)) != 0)
            .collect()
    }

    #[test]
    fn an_allow_list_keeps_only_its_tokens() {
        let f = TokenFilter {
            allowed: Some(vec![0, 31, 32, 70]),
            banned: vec![],
        };
        let mut mask = vec![u32::MAX; mask_words(71)];
        restrict(&f, &mut mask, &[]);
        assert_eq!(allowed(&mask), [0, 31, 32, 70]);
        // A grammar's mask narrows it further.
        let mut mask = vec![0; mask_words(71)];
        mask[1] = 1; // token 32
        mask[0] = 1 << 5;
        restrict(&f, &mut mask, &[]);
        assert_eq!(allowed(&mask), [32]);
    }

    #[test]
    fn a_banned_sequence_masks_its_last_token_after_the_rest() {
        let f = TokenFilter {
            allowed: None,
            banned: vec![vec![7], vec![3, 4, 5], vec![9, 5]],
        };
        assert_eq!(f.context(), 2);
        let run = |recent: &[u32]| {
            let mut mask = vec![u32::MAX; 1];
            restrict(&f, &mut mask, recent);
            (0..10)
                .filter(|&t| mask[0] & (1 << t) == 0)
                .collect::<Vec<u32>>()
        };
        assert_eq!(run(&[]), [7]);
        assert_eq!(run(&[3]), [7]);
        assert_eq!(run(&[3, 4]), [5, 7]);
        assert_eq!(run(&[4, 3, 4]), [5, 7]);
        assert_eq!(run(&[3, 4, 6]), [7]);
        assert_eq!(run(&[1, 9]), [5, 7]);
        assert!(TokenFilter::default().is_empty());
        assert!(!f.is_empty());
    }
}
