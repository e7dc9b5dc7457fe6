//! A conversation fitted to the context, as a chat app keeps a long chat going (LM Studio's
//! rolling window, llama.cpp's context shift): when the whole conversation and the room its
//! reply needs exceed the context, the oldest exchanges are left out of the prompt (the chat
//! itself keeps them), the system prompt and the latest exchange always kept.
//!
//! The cut is chosen to keep the prefix cache useful: a new cut leaves a quarter of the space
//! free, and the caller passes the last cut back, which is kept while the conversation still
//! fits after it. So the turns after a cut extend the same prompt (each prefilling only its
//! own messages) instead of every turn moving the cut by one exchange and the whole prompt
//! being computed again.

use kiln_model::ChatMessage;

use crate::{ChatExtras, Frontend, ParamError};

/// A conversation's prompt, fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub prompt: Vec<u32>,
    /// Messages at the start of the conversation (after its system messages) left out: the
    /// cut to pass back with the next turn.
    pub dropped: usize,
}

impl Frontend {
    /// The tokens of `messages` rendered with `extras` (as [`Frontend::render_chat`]) with at
    /// least `room` tokens left for the reply in a context of `max_len`. Where the whole
    /// conversation leaves less, its oldest exchanges (a user message and every message up to
    /// the next) are left out: the cut `kept` (the last turn's [`Fitted::dropped`]) while the
    /// rest still fits after it, else the fewest exchanges that leave a quarter of the space
    /// free (or, failing that, that fit at all). Leading system messages and the latest
    /// exchange are always kept; an error says so with the numbers when those alone do not
    /// fit.
    pub fn fit_chat(
        &self,
        messages: Vec<ChatMessage>,
        extras: &ChatExtras,
        max_len: usize,
        room: usize,
        kept: usize,
    ) -> Result<Fitted, ParamError> {
        let space = max_len.saturating_sub(room);
        let tokens = |m: Vec<ChatMessage>| {
            let text = self.render_chat(m, extras)?;
            self.encode(&text, false, "messages")
        };
        // Where each exchange starts: the user messages after the leading system ones.
        let head = messages.iter().take_while(|m| m.role == "system").count();
        let starts: Vec<usize> = (head..messages.len())
            .filter(|&i| messages[i].role == "user")
            .collect();
        // The conversation with its first `k` exchanges left out (`k` 0: whole).
        let without = |k: usize| {
            let cut = match k {
                0 => head,
                k => starts.get(k).copied().unwrap_or(messages.len()),
            };
            let kept: Vec<ChatMessage> = (messages[..head].iter())
                .chain(&messages[cut..])
                .cloned()
                .collect();
            tokens(kept).map(|p| Fitted {
                prompt: p,
                dropped: cut - head,
            })
        };
        let last = starts.len().saturating_sub(1);
        // The last cut, while the conversation after it still fits.
        let previous = starts.iter().position(|&s| s - head == kept && kept > 0);
        let from = previous.unwrap_or(0);
        let at = without(from)?;
        if at.prompt.len() <= space {
            return Ok(at);
        }
        // A new cut: the fewest exchanges after it leaving a quarter free, else that fit.
        let shortest = without(last)?;
        if last <= from || shortest.prompt.len() > space {
            return Err(ParamError::new(
                "messages",
                format!(
                    "the latest exchange takes {} tokens and its reply {room}, more than the model's context of {max_len} tokens",
                    shortest.prompt.len()
                ),
            ));
        }
        let roomy = space - space / 4;
        let limit = if shortest.prompt.len() <= roomy {
            roomy
        } else {
            space
        };
        // Fewest exchanges left out within `limit`: leaving out more only shortens the prompt.
        let (mut lo, mut hi, mut best) = (from + 1, last, shortest);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let f = without(mid)?;
            if f.prompt.len() <= limit {
                (hi, best) = (mid, f);
            } else {
                lo = mid + 1;
            }
        }
        Ok(best)
    }
}
