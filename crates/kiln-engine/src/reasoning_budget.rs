//! A reasoning budget: how many tokens a reply may spend inside its `<think>` block (its
//! closing tag's tokens included) before `</think>` is written for it, one forced token per
//! step (the grammar then goes on as after any block). Where the block's text already ends
//! with the start of the tag (`</th`, say) when the budget runs out, only the rest of the tag
//! is written. A block the model closes itself within the budget is left alone, and a reply
//! that does not open one is not bounded.

use std::sync::Arc;

const OPEN: &[u8] = b"<think>";
const CLOSE: &[u8] = b"</think>";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Too little text to tell whether the reply opens a block.
    Undecided,
    Inside,
    /// The block closed (or never opened): nothing more to bound.
    Done,
}

pub(crate) struct Budget {
    /// Tokens the block may still take.
    left: usize,
    /// The tokens of `</think>` from each byte on (`closes[k]` writes `CLOSE[k..]`); the
    /// byte those being forced start from, and how many of them were forced.
    closes: Arc<[Vec<u32>]>,
    from: usize,
    forced: usize,
    /// The reply's first bytes while undecided, then the block's last bytes (enough to see
    /// `</think>` written across tokens).
    text: Vec<u8>,
    state: State,
}

impl Budget {
    /// `opened`: the prompt opened the block, so the reply starts inside it.
    pub fn new(budget: usize, opened: bool, closes: Arc<[Vec<u32>]>) -> Budget {
        Budget {
            left: budget,
            closes,
            from: 0,
            forced: 0,
            text: Vec::new(),
            state: if opened {
                State::Inside
            } else {
                State::Undecided
            },
        }
    }

    /// The token that must come next, once the budget is spent inside the block.
    pub fn forced(&self) -> Option<u32> {
        (self.state == State::Inside && self.left == 0).then(|| self.close()[self.forced])
    }

    /// Takes the token the reply was given and its bytes.
    pub fn consume(&mut self, token: u32, bytes: &[u8]) {
        match self.state {
            State::Done => {}
            State::Undecided => {
                self.text.extend_from_slice(bytes);
                if self.text.starts_with(OPEN) {
                    // The opening tag is not reasoning; what follows it in the token is.
                    self.text.drain(..OPEN.len());
                    self.state = State::Inside;
                    self.inside(&[]);
                } else if !OPEN.starts_with(&self.text) {
                    self.state = State::Done;
                }
            }
            State::Inside if self.left == 0 => {
                self.forced += 1;
                let close = self.close();
                if token != close[self.forced - 1] || self.forced == close.len() {
                    self.state = State::Done;
                }
            }
            State::Inside => {
                self.left -= 1;
                self.inside(bytes);
                if self.left == 0 && self.state == State::Inside {
                    // The tag's start the block already ends with is not written again.
                    self.from = (1..CLOSE.len())
                        .rev()
                        .find(|&k| self.text.ends_with(&CLOSE[..k]))
                        .unwrap_or(0);
                }
            }
        }
    }

    /// The tokens being forced.
    fn close(&self) -> &[u32] {
        &self.closes[self.from]
    }

    /// More of the block's text: closed once it holds `</think>`.
    fn inside(&mut self, bytes: &[u8]) {
        self.text.extend_from_slice(bytes);
        if self.text.windows(CLOSE.len()).any(|w| w == CLOSE) {
            self.state = State::Done;
        } else {
            let keep = self.text.len().saturating_sub(CLOSE.len() - 1);
            self.text.drain(..keep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `</think>` from byte `k` on as token ids: `[1, 2, 3]` whole, and `[10 + k]` for each
    /// later start.
    fn closes() -> Arc<[Vec<u32>]> {
        let mut c = vec![vec![1u32, 2, 3]];
        c.extend((1..CLOSE.len() as u32).map(|k| vec![10 + k]));
        c.into()
    }

    /// Feeds `pieces` (one token each, ids from 100) and returns the forced token after each.
    fn run(budget: usize, opened: bool, pieces: &[&str]) -> Vec<Option<u32>> {
        let mut b = Budget::new(budget, opened, closes());
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let token = b.forced().unwrap_or(100 + i as u32);
                b.consume(token, p.as_bytes());
                b.forced()
            })
            .collect()
    }

    #[test]
    fn a_spent_budget_forces_the_closing_tag_token_by_token() {
        let got = run(2, true, &["a", "b", "x", "x", "x", "c"]);
        assert_eq!(got, [None, Some(1), Some(2), Some(3), None, None]);
        // The model opens the block itself: the tag is not counted.
        let got = run(1, false, &["<th", "ink>\n", "a", "x", "x", "x"]);
        assert_eq!(got, [None, None, Some(1), Some(2), Some(3), None]);
        let got = run(1, false, &["<think>a", "x"]);
        assert_eq!(got, [None, Some(1)]);
    }

    #[test]
    fn a_tag_begun_when_the_budget_runs_out_is_finished_not_repeated() {
        // "</th" written: "ink>" (from byte 4) is forced, one token here.
        assert_eq!(
            run(2, true, &["a", "</th", "x", "b"]),
            [None, Some(14), None, None]
        );
        assert_eq!(run(2, true, &["a<", "/", "x"]), [None, Some(12), None]);
        // Not the tag's start: the whole tag.
        assert_eq!(run(1, true, &["</a", "x"]), [Some(1), Some(2)]);
    }

    #[test]
    fn a_block_closed_in_time_or_never_opened_is_left_alone() {
        assert_eq!(run(3, true, &["a", "</th", "ink>", "b", "c"]), [None; 5]);
        assert_eq!(run(3, false, &["Sure", "a", "b", "c", "d"]), [None; 5]);
        assert_eq!(run(0, false, &["<", "x"]), [None, None]);
        // A budget of none closes the block at once.
        assert_eq!(
            run(0, true, &["x", "x", "x", "a"]),
            [Some(2), Some(3), None, None]
        );
    }
}
