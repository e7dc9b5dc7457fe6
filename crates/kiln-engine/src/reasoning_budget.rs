//! A reasoning budget: how many tokens a reply may spend inside its reasoning (a `<think>`
//! block, or gpt-oss's `analysis` messages: [`ReasoningTags`]), its closing tag's tokens
//! included, before the closing tag is written for it, one forced token per step (the
//! grammar then goes on as after any reasoning). Where the text already ends with the start
//! of a tag the vocabulary spells in several tokens (`</th`, say) when the budget runs out,
//! only the rest of the tag is written; where it ends within a UTF-8 character, the tag
//! waits for the character's last byte. Reasoning the model closes itself within the budget
//! is left alone; a `<think>` block opens only at the reply's start, while `analysis`
//! messages share one budget wherever they open (one opened once it is spent is closed at
//! once).

use std::sync::Arc;

use kiln_core::ReasoningTags;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Outside reasoning, watching for its opening tag.
    Outside,
    Inside,
    /// No more reasoning can open: nothing more to bound.
    Done,
}

pub(crate) struct Budget {
    tags: ReasoningTags,
    /// Tokens the reasoning may still take.
    left: usize,
    /// The closing tag's tokens from each byte on (`closes[k]` writes its bytes from `k`;
    /// only `closes[0]` where the tag is one token); the byte those being forced start
    /// from, and how many of them were forced.
    closes: Arc<[Vec<u32>]>,
    from: usize,
    forced: usize,
    /// The reply's last bytes, enough to see a tag written across tokens (all of them while
    /// a `<think>` block may still open).
    text: Vec<u8>,
    state: State,
}

impl Budget {
    /// `opened`: the prompt opened the reasoning, so the reply starts inside it.
    pub fn new(
        tags: ReasoningTags,
        budget: usize,
        opened: bool,
        closes: Arc<[Vec<u32>]>,
    ) -> Budget {
        Budget {
            tags,
            left: budget,
            closes,
            from: 0,
            forced: 0,
            text: Vec::new(),
            state: if opened {
                State::Inside
            } else {
                State::Outside
            },
        }
    }

    /// The token that must come next, once the budget is spent inside reasoning.
    pub fn forced(&self) -> Option<u32> {
        (self.forcing()).then(|| self.close()[self.forced])
    }

    /// Whether the budget is spent inside reasoning that stands at a character's end (the
    /// tag is not written into the middle of one: the grammar keeps the text whole UTF-8).
    fn forcing(&self) -> bool {
        self.state == State::Inside && self.left == 0 && !mid_char(&self.text)
    }

    /// The closing tag the forced tokens write.
    pub fn tag(&self) -> &'static str {
        self.tags.close()
    }

    /// Takes the token the reply was given and its bytes.
    pub fn consume(&mut self, token: u32, bytes: &[u8]) {
        match self.state {
            State::Done => {}
            State::Outside => self.outside(bytes),
            State::Inside if self.forcing() => {
                self.forced += 1;
                let close = self.close();
                if token != close[self.forced - 1] || self.forced == close.len() {
                    self.closed(&[]);
                }
            }
            State::Inside => {
                self.left = self.left.saturating_sub(1);
                self.inside(bytes);
                if self.left == 0 && self.state == State::Inside {
                    // The tag's start the reasoning already ends with is not written again.
                    let close = self.tags.close().as_bytes();
                    self.from = (1..self.closes.len())
                        .rev()
                        .find(|&k| self.text.ends_with(&close[..k]))
                        .unwrap_or(0);
                }
            }
        }
    }

    /// The tokens being forced.
    fn close(&self) -> &[u32] {
        &self.closes[self.from]
    }

    /// More text outside reasoning: inside once it holds the opening tag (what follows the
    /// tag is reasoning); done where reasoning can no longer open.
    fn outside(&mut self, bytes: &[u8]) {
        let open = self.tags.open().as_bytes();
        self.text.extend_from_slice(bytes);
        let at = find(&self.text, open).filter(|&i| i == 0 || self.tags.anywhere());
        if let Some(i) = at {
            // The opening tag is not reasoning; what follows it in the token is.
            let rest = self.text.split_off(i + open.len());
            self.text.clear();
            (self.state, self.from, self.forced) = (State::Inside, 0, 0);
            self.inside(&rest);
        } else if self.tags.anywhere() {
            let keep = self.text.len().saturating_sub(open.len() - 1);
            self.text.drain(..keep);
        } else if !open.starts_with(&self.text) {
            self.state = State::Done;
        }
    }

    /// More reasoning: closed once it holds the closing tag.
    fn inside(&mut self, bytes: &[u8]) {
        let close = self.tags.close().as_bytes();
        self.text.extend_from_slice(bytes);
        if let Some(i) = find(&self.text, close) {
            let rest = self.text.split_off(i + close.len());
            self.closed(&rest);
        } else {
            let keep = self.text.len().saturating_sub(close.len() - 1);
            self.text.drain(..keep);
        }
    }

    /// The reasoning closed, `rest` written after its tag in the same token.
    fn closed(&mut self, rest: &[u8]) {
        self.text.clear();
        if self.tags.anywhere() {
            self.state = State::Outside;
            self.outside(rest);
        } else {
            self.state = State::Done;
        }
    }
}

/// Whether `text` ends within a UTF-8 character (its last lead byte wants more bytes).
fn mid_char(text: &[u8]) -> bool {
    for back in 1..=text.len().min(4) {
        let b = text[text.len() - back];
        if b & 0xC0 != 0x80 {
            let len = match b {
                0xF0.. => 4,
                0xE0.. => 3,
                0xC0.. => 2,
                _ => 1,
            };
            return len > back;
        }
    }
    false
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `</think>` from byte `k` on as token ids: `[1, 2, 3]` whole, and `[10 + k]` for each
    /// later start.
    fn closes() -> Arc<[Vec<u32>]> {
        let mut c = vec![vec![1u32, 2, 3]];
        c.extend((1..ReasoningTags::Think.close().len() as u32).map(|k| vec![10 + k]));
        c.into()
    }

    /// Feeds `pieces` (one token each, ids from 100) and returns the forced token after each.
    fn run(budget: usize, opened: bool, pieces: &[&str]) -> Vec<Option<u32>> {
        run_tags(ReasoningTags::Think, closes(), budget, opened, pieces)
    }

    fn run_tags(
        tags: ReasoningTags,
        closes: Arc<[Vec<u32>]>,
        budget: usize,
        opened: bool,
        pieces: &[&str],
    ) -> Vec<Option<u32>> {
        let mut b = Budget::new(tags, budget, opened, closes);
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

    #[test]
    fn a_spent_budget_waits_for_the_end_of_a_character() {
        let mut b = Budget::new(ReasoningTags::Think, 2, true, closes());
        let e = "é".as_bytes();
        b.consume(100, b"a");
        b.consume(101, &e[..1]);
        // Spent in the middle of `é`: its last byte first, then the tag.
        assert_eq!(b.forced(), None);
        b.consume(102, &e[1..]);
        assert_eq!(b.forced(), Some(1));
        assert!(mid_char("a\u{1F600}".as_bytes().split_last().unwrap().1));
        assert!(!mid_char("a\u{1F600}".as_bytes()) && !mid_char(b"") && !mid_char(b"x"));
    }

    /// gpt-oss's `<|end|>` as one token, 7: what a harmony reply is given, one token a
    /// piece (`<|channel|>analysis<|message|>` being three tokens in its vocabulary).
    fn harmony(budget: usize, pieces: &[&str]) -> Vec<Option<u32>> {
        let closes: Arc<[Vec<u32>]> = vec![vec![7u32]].into();
        run_tags(ReasoningTags::Harmony, closes, budget, false, pieces)
    }

    #[test]
    fn harmony_analysis_messages_share_one_budget_wherever_they_open() {
        let open = ["<|channel|>", "analysis", "<|message|>"];
        let mut pieces = open.to_vec();
        pieces.extend(["a", "b", "<|end|>"]);
        // The header is not counted; two tokens of reasoning, then `<|end|>` forced.
        let got = harmony(2, &pieces);
        assert_eq!(got, [None, None, None, None, Some(7), None]);
        // The end of a message is one token: a `<` before it is not the tag's start.
        assert_eq!(
            harmony(2, &[open[0], open[1], open[2], "a<", "b"])[4],
            Some(7)
        );
        // A message closed in time leaves the rest of the budget to the next one, which
        // opens after another message; spent, a message that opens is closed at once.
        let mut pieces = open.to_vec();
        pieces.extend([
            "a",
            "<|end|>",
            "<|start|>assistant<|channel|>commentary<|message|>",
        ]);
        pieces.extend(["hi", "<|end|>", "<|start|>assistant"]);
        pieces.extend(open);
        pieces.extend(["b", "<|end|>"]);
        pieces.extend([
            "<|start|>assistant<|channel|>analysis<|message|>",
            "<|end|>",
        ]);
        let got = harmony(3, &pieces);
        let mut want = [None; 16];
        (want[12], want[14]) = (Some(7), Some(7));
        assert_eq!(got, want);
        // A reply that starts with its answer may still reason later.
        let got = harmony(
            0,
            &["<|channel|>final<|message|>", "x", "<|end|>", "<|start|>"],
        );
        assert_eq!(got, [None; 4]);
        let got = harmony(
            0,
            &[
                "<|channel|>final<|message|>x<|end|><|start|>assistant",
                "<|channel|>analysis<|message|>",
                "<|end|>",
            ],
        );
        assert_eq!(got, [None, Some(7), None]);
    }
}
