//! [`TextStream`]: one generated sequence's token ids in, text out: decoded incrementally
//! (whole UTF-8 characters only) and cut before the first stop string, which is not shown
//! unless asked for (`including_stop`); with `stops_after(n)` no stop string ends in the
//! text of the first `n` tokens (one may start there and end after it). The token that stopped a sequence (an end-of-sequence or stop
//! token id) writes no text.

use kiln_model::{ModelError, Tokenizer};
use kiln_scheduler::RequestUpdate;

use crate::{IncrementalDecoder, StopMatcher};

#[derive(Clone, Debug, Default)]
pub struct TextStream {
    decoder: IncrementalDecoder,
    stop: StopMatcher,
    stopped: bool,
    /// Tokens whose text is let through unsearched (`stops_after`), and tokens seen.
    unsearched: usize,
    seen: usize,
}

/// What one [`TextStream::next`] lets out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    /// A stop string matched: the sequence should end now, and nothing more is shown.
    pub stopped: bool,
    /// The stop string that matched, on the piece where it did.
    pub matched: Option<String>,
}

impl TextStream {
    /// `skip_special`: special tokens write no text.
    pub fn new(stop: Vec<String>, skip_special: bool) -> Self {
        Self {
            decoder: IncrementalDecoder::new(skip_special),
            stop: StopMatcher::new(stop),
            stopped: false,
            unsearched: 0,
            seen: 0,
        }
    }

    /// Keeps the stop string that matched at the end of the text.
    pub fn including_stop(mut self, include: bool) -> Self {
        self.stop.include_match(include);
        self
    }

    /// Finds only stop strings that end in the text of tokens after the first `n` (vLLM's
    /// `min_tokens`).
    pub fn stops_after(mut self, n: usize) -> Self {
        self.unsearched = n;
        self
    }

    /// The text of one of the engine's updates for this sequence.
    pub fn update(
        &mut self,
        tokenizer: &Tokenizer,
        u: &RequestUpdate,
    ) -> Result<Piece, ModelError> {
        let token = u.token.as_ref().filter(|_| !u.ended_by_token);
        let token = token.map(|t| t.token_id);
        self.next(tokenizer, token, u.finished.is_some())
    }

    /// The text of a step's update: `token` (none when the sequence ended without one) and
    /// `last` (the sequence ends here, so held-back text is released).
    pub fn next(
        &mut self,
        tokenizer: &Tokenizer,
        token: Option<u32>,
        last: bool,
    ) -> Result<Piece, ModelError> {
        if self.stopped {
            return Ok(Piece {
                text: String::new(),
                stopped: true,
                matched: None,
            });
        }
        let mut text = String::new();
        // Ids past the tokenizer's vocabulary (padded embedding rows) have no text.
        if let Some(t) = token
            && (t as usize) < tokenizer.vocab_size()
        {
            text = self.decoder.push(tokenizer, t)?;
        }
        if last {
            text += &self.decoder.flush(tokenizer)?;
        }
        self.seen += usize::from(token.is_some());
        if self.seen <= self.unsearched {
            let mut text = self.stop.push_unsearched(&text);
            if last {
                text += &self.stop.flush();
            }
            return Ok(Piece {
                text,
                ..Piece::default()
            });
        }
        let out = self.stop.push(&text);
        self.stopped = out.stopped;
        let mut text = out.text;
        if last && !out.stopped {
            text += &self.stop.flush();
        }
        Ok(Piece {
            text,
            stopped: out.stopped,
            matched: out.matched,
        })
    }
}
