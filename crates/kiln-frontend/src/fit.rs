//! A conversation fitted to the context, as a chat app keeps a long chat going (LM Studio's
//! rolling window, Ollama's truncation): when the whole conversation and the room its reply
//! needs exceed the context, the oldest exchanges are left out of the prompt (the chat itself
//! keeps them), the system prompt and the latest exchange always kept.

use kiln_model::ChatMessage;

use crate::{ChatExtras, Frontend, ParamError};

/// A conversation's prompt, fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub prompt: Vec<u32>,
    /// Messages at the start of the conversation (after its system messages) left out.
    pub dropped: usize,
}

impl Frontend {
    /// The tokens of `messages` rendered with `extras` (as [`Frontend::render_chat`]) with at
    /// least `room` tokens left for the reply in a context of `max_len`. Where the whole
    /// conversation leaves less, its oldest exchanges (a user message and every message up to
    /// the next) are left out, as few as fit; leading system messages and the latest
    /// exchange are always kept, and an error says so with the numbers when those alone do
    /// not fit.
    pub fn fit_chat(
        &self,
        messages: Vec<ChatMessage>,
        extras: &ChatExtras,
        max_len: usize,
        room: usize,
    ) -> Result<Fitted, ParamError> {
        let fits = |p: &[u32]| p.len() + room <= max_len;
        let tokens = |m: Vec<ChatMessage>| {
            let text = self.render_chat(m, extras)?;
            self.encode(&text, false, "messages")
        };
        let whole = tokens(messages.clone())?;
        if fits(&whole) {
            return Ok(Fitted {
                prompt: whole,
                dropped: 0,
            });
        }
        // Where each exchange starts: the user messages after the leading system ones.
        let head = messages.iter().take_while(|m| m.role == "system").count();
        let starts: Vec<usize> = (head..messages.len())
            .filter(|&i| messages[i].role == "user")
            .collect();
        let without = |k: usize| {
            // The conversation with its first `k` exchanges left out.
            let cut = starts.get(k).copied().unwrap_or(messages.len());
            let kept: Vec<ChatMessage> = (messages[..head].iter())
                .chain(&messages[cut..])
                .cloned()
                .collect();
            tokens(kept).map(|p| (p, cut - head))
        };
        let last = starts.len().saturating_sub(1);
        let (shortest, dropped) = without(last)?;
        if last == 0 || !fits(&shortest) {
            return Err(ParamError::new(
                "messages",
                format!(
                    "the latest exchange takes {} tokens and its reply {room}, more than the model's context of {max_len} tokens",
                    shortest.len()
                ),
            ));
        }
        // Fewest exchanges left out that fit: dropping more only shortens the prompt.
        let (mut lo, mut hi) = (1, last);
        let mut best = (shortest, dropped);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let (p, d) = without(mid)?;
            if fits(&p) {
                (hi, best) = (mid, (p, d));
            } else {
                lo = mid + 1;
            }
        }
        Ok(Fitted {
            prompt: best.0,
            dropped: best.1,
        })
    }
}
