//! A reply's reasoning set apart from its answer. Models trained to think first (Qwen3, QwQ,
//! DeepSeek-R1 and its distillations) write `<think>...</think>` before the answer, or, where
//! the chat template opens the block itself (the prompt ends with `<think>`), the reasoning
//! and then `</think>`. [`ReasoningStream`] splits such a reply as it streams: text inside the
//! block is reasoning, text after it the answer; text that may still be a tag is held back.
//! Newlines next to the tags are dropped, as the templates drop them when rendering a past
//! turn. gpt-oss writes its reasoning in a channel of its own instead (`crate::harmony`).

use kiln_core::{Grammar, ReasoningTags};
use kiln_model::{ChatTemplate, Tokenizer};

const OPEN: &str = ReasoningTags::Think.open();
const CLOSE: &str = ReasoningTags::Think.close();

/// How a model marks its reasoning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningFormat {
    /// Replies are all answer.
    None,
    /// `<think>` reasoning `</think>` answer.
    Think,
    /// gpt-oss's harmony messages: the `analysis` channel's reasoning, the others' answer.
    Harmony,
}

impl ReasoningFormat {
    /// `Harmony` where the chat template writes gpt-oss's messages, `Think` where it knows
    /// both tags (it renders or strips past reasoning).
    pub fn detect(template: Option<&ChatTemplate>) -> ReasoningFormat {
        match template {
            Some(t) if crate::harmony::template_writes(t.source()) => ReasoningFormat::Harmony,
            Some(t) if t.source().contains(OPEN) && t.source().contains(CLOSE) => {
                ReasoningFormat::Think
            }
            _ => ReasoningFormat::None,
        }
    }

    /// Whether a reply to the rendered `prompt` (its end suffices) starts inside a block
    /// the template opened.
    pub fn opened_by(self, prompt: &str) -> bool {
        self == ReasoningFormat::Think && prompt.trim_end().ends_with(OPEN)
    }

    /// [`ReasoningFormat::opened_by`] for a tokenized prompt (its last tokens tell).
    pub fn opened_by_ids(self, tokenizer: &Tokenizer, prompt: &[u32]) -> bool {
        let tail = &prompt[prompt.len().saturating_sub(8)..];
        let text = tokenizer.decode(tail, false).unwrap_or_default();
        self.opened_by(&text)
    }

    /// The splitter for one reply (`opened`: see [`ReasoningFormat::opened_by`]).
    pub fn stream(self, opened: bool) -> ReasoningStream {
        ReasoningStream {
            format: self,
            opened,
            text: String::new(),
            sent: (0, 0),
            tokens: (0, 0),
        }
    }

    /// What a constrained reply must match: `grammar` after the reasoning, so a model that
    /// thinks still does before it answers in the grammar (a harmony reply: in its `final`
    /// message, after any `analysis` one).
    pub fn grammar(self, grammar: Grammar, opened: bool) -> Grammar {
        match self {
            ReasoningFormat::None => grammar,
            ReasoningFormat::Harmony => crate::harmony::final_answer(grammar),
            ReasoningFormat::Think => Grammar::AfterReasoning {
                opened,
                grammar: Box::new(grammar),
            },
        }
    }

    /// What a reply must match: `grammar` after the reasoning ([`Self::grammar`]), and at
    /// most `budget` tokens of reasoning ([`Self::budgeted`]); `None` when nothing holds it.
    pub fn constrain(
        self,
        grammar: Option<Grammar>,
        opened: bool,
        budget: Option<usize>,
    ) -> Option<Grammar> {
        match budget {
            Some(n) => self.budgeted(grammar, opened, n),
            None => grammar.map(|g| self.grammar(g, opened)),
        }
    }

    /// A reply whose reasoning may take at most `budget` tokens (its `<think>` block, or all
    /// of a harmony reply's `analysis` messages), then `grammar` (any answer when `None`);
    /// `None` for a model that does not reason, which has no reasoning to bound.
    pub fn budgeted(
        self,
        grammar: Option<Grammar>,
        opened: bool,
        budget: usize,
    ) -> Option<Grammar> {
        let (tags, grammar) = match (self, grammar) {
            (ReasoningFormat::None, _) => return None,
            (ReasoningFormat::Think, g) => (
                ReasoningTags::Think,
                self.grammar(g.unwrap_or_else(Grammar::any_text), opened),
            ),
            (ReasoningFormat::Harmony, Some(g)) => {
                (ReasoningTags::Harmony, self.grammar(g, opened))
            }
            (ReasoningFormat::Harmony, None) => {
                (ReasoningTags::Harmony, crate::harmony::any_answer())
            }
        };
        Some(Grammar::Budgeted {
            tags,
            tokens: budget,
            opened,
            grammar: Box::new(grammar),
        })
    }
}

/// One reply's text split into reasoning and answer as it grows.
#[derive(Clone, Debug)]
pub struct ReasoningStream {
    format: ReasoningFormat,
    /// The prompt opened the block.
    opened: bool,
    text: String,
    /// Bytes of reasoning and of answer let out so far.
    sent: (usize, usize),
    /// Tokens that wrote reasoning (its tags included), and tokens whose text does not yet
    /// tell whether the reply opens a block.
    tokens: (usize, usize),
}

/// Where a reply's text stands.
#[derive(PartialEq)]
enum Side {
    /// Too short to tell whether it opens a block.
    Undecided,
    Reasoning,
    /// Past the block, or without one.
    Answer,
}

/// What one [`ReasoningStream::push`] lets out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub reasoning: String,
    pub content: String,
}

impl ReasoningStream {
    /// Takes the reply's next text (`last`: the reply ends here, so nothing is held back);
    /// returns the reasoning and answer text new since the last call.
    pub fn push(&mut self, text: &str, last: bool) -> Split {
        self.push_tokens(text, 0, last)
    }

    /// [`Self::push`] for text that `tokens` generated tokens wrote, counted into
    /// [`Self::reasoning_tokens`] when they wrote reasoning.
    pub fn push_tokens(&mut self, text: &str, tokens: usize, last: bool) -> Split {
        if self.format != ReasoningFormat::None {
            match self.side() {
                Side::Reasoning => self.tokens.0 += tokens,
                Side::Answer => {}
                Side::Undecided => self.tokens.1 += tokens,
            }
        }
        let out = self.split_more(text, last);
        if self.tokens.1 > 0 && self.side() != Side::Undecided {
            // The reply's first tokens wrote the opening tag, or began the answer.
            let opened = self.text.trim_start().starts_with(OPEN);
            self.tokens.0 += std::mem::take(&mut self.tokens.1) * usize::from(opened);
        }
        out
    }

    /// Tokens of the reply so far that wrote its reasoning, tags included (a token that
    /// closed the block and began the answer counts as reasoning).
    pub fn reasoning_tokens(&self) -> usize {
        self.tokens.0
    }

    fn side(&self) -> Side {
        if self.format == ReasoningFormat::Harmony {
            return match crate::harmony::in_reasoning(&self.text) {
                true => Side::Reasoning,
                false => Side::Answer,
            };
        }
        let body = if self.opened {
            &self.text[..]
        } else {
            let t = self.text.trim_start();
            match t.strip_prefix(OPEN) {
                Some(rest) => rest,
                None if OPEN.starts_with(t) => return Side::Undecided,
                None => return Side::Answer,
            }
        };
        match body.contains(CLOSE) {
            true => Side::Answer,
            false => Side::Reasoning,
        }
    }

    fn split_more(&mut self, text: &str, last: bool) -> Split {
        if self.format == ReasoningFormat::None {
            return Split {
                reasoning: String::new(),
                content: text.to_string(),
            };
        }
        self.text.push_str(text);
        let harmony;
        let (reasoning, content) = match self.format {
            ReasoningFormat::Harmony => {
                harmony = crate::harmony::split(&self.text, last);
                (harmony.0.as_str(), harmony.1.as_str())
            }
            _ => split(&self.text, self.opened, last),
        };
        let out = Split {
            reasoning: reasoning[self.sent.0..].to_string(),
            content: content[self.sent.1..].to_string(),
        };
        self.sent = (reasoning.len(), content.len());
        out
    }
}

/// The whole of a reply as far as it is known: its reasoning and its answer. Each only grows
/// as `text` does (held-back text is let out later, never taken back).
fn split(text: &str, opened: bool, last: bool) -> (&str, &str) {
    let body = if opened {
        text
    } else {
        let t = text.trim_start();
        match t.strip_prefix(OPEN) {
            Some(rest) => rest,
            None if !last && OPEN.starts_with(t) => return ("", ""),
            None => return ("", text),
        }
    };
    let body = body.trim_start_matches('\n');
    match body.find(CLOSE) {
        Some(i) => (
            body[..i].trim_end_matches('\n'),
            body[i + CLOSE.len()..].trim_start_matches('\n'),
        ),
        None if last => (body.trim_end_matches('\n'), ""),
        None => {
            // Hold back a tail that may be the start of the closing tag, and newlines that
            // may come before it.
            let keep = crate::partial_suffix(body, CLOSE);
            (body[..body.len() - keep].trim_end_matches('\n'), "")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` pushed a character at a time, then the end: the reasoning and answer let out.
    fn replay(text: &str, prompt: &str) -> (String, String) {
        let think = ReasoningFormat::Think;
        let mut s = think.stream(think.opened_by(prompt));
        let (mut r, mut c) = (String::new(), String::new());
        for ch in text.chars() {
            let out = s.push(&ch.to_string(), false);
            r += &out.reasoning;
            c += &out.content;
        }
        let out = s.push("", true);
        (r + &out.reasoning, c + &out.content)
    }

    #[test]
    fn tokens_that_wrote_reasoning_are_counted() {
        let think = ReasoningFormat::Think;
        let count = |pieces: &[&str], opened: bool| {
            let mut s = think.stream(opened);
            for p in pieces {
                s.push_tokens(p, 1, false);
            }
            s.push_tokens("", 0, true);
            s.reasoning_tokens()
        };
        let block = ["<think>", "\nA", " b", "</think>", "\n\nAns", "wer"];
        assert_eq!(count(&block, false), 4);
        assert_eq!(count(&["Step", " one.", "\n</", "think>", "Done"], true), 4);
        assert_eq!(count(&["Pla", "in"], false), 0);
        // The first tokens tell only later whether they opened a block.
        assert_eq!(count(&["<th", "ink>", "x", "</think>", "y"], false), 4);
        assert_eq!(count(&["<th", "e end"], false), 0);
        // Cut inside the block: all reasoning; not split at all: none.
        assert_eq!(count(&["a", "b"], true), 2);
        let mut plain = ReasoningFormat::None.stream(false);
        plain.push_tokens("<think>x", 2, true);
        assert_eq!(plain.reasoning_tokens(), 0);
    }

    fn pair(r: &str, c: &str) -> (String, String) {
        (r.to_string(), c.to_string())
    }

    #[test]
    fn a_think_block_is_reasoning_and_the_rest_the_answer() {
        let text = "<think>\nFirst <b>, then 2 < 3.\n\n</think>\n\nThe answer is 5.";
        let want = pair("First <b>, then 2 < 3.", "The answer is 5.");
        assert_eq!(replay(text, "user: hi\nassistant:"), want);
        // The template opened the block: the reply starts inside it.
        let inside = "Step one.\n</think>\n\nDone.";
        assert_eq!(
            replay(inside, "<|im_start|>assistant\n<think>\n"),
            pair("Step one.", "Done.")
        );
        // Without a block, all answer (a tag later in the text is the answer's).
        for text in [
            "Plain.",
            " <thinking> is a word",
            "a <think>b</think>",
            "<thi",
        ] {
            assert_eq!(replay(text, ""), pair("", text), "{text}");
        }
        // Cut before the block closes: all reasoning.
        assert_eq!(replay("<think>\nHmm, so\n", ""), pair("Hmm, so", ""));
        assert!(!ReasoningFormat::None.opened_by("<think>\n"));
    }

    /// gpt-oss's replies through the stream, token by token: the analysis channel's text is
    /// reasoning, and the tokens that wrote it (its headers included) are counted.
    #[test]
    fn harmony_replies_split_by_channel() {
        let harmony = ReasoningFormat::Harmony;
        let mut s = harmony.stream(harmony.opened_by("<|start|>assistant"));
        let pieces = [
            "<|channel|>",
            "analysis",
            "<|message|>",
            "Think",
            " more",
            "<|end|>",
            "<|start|>",
            "assistant",
            "<|channel|>",
            "final",
            "<|message|>",
            "Done",
            ".",
        ];
        let (mut r, mut c) = (String::new(), String::new());
        for p in pieces {
            let out = s.push_tokens(p, 1, false);
            r += &out.reasoning;
            c += &out.content;
        }
        let out = s.push_tokens("", 0, true);
        assert_eq!(
            (r + &out.reasoning, c + &out.content),
            pair("Think more", "Done.")
        );
        // The reasoning and both headers up to the final channel's name, which tells.
        assert_eq!(s.reasoning_tokens(), 10);
    }

    /// A harmony reply under a grammar reasons as it likes, then answers in a `final`
    /// message held to the grammar; a tools grammar, framed in messages already, is kept.
    #[test]
    fn harmony_grammars_hold_the_final_message() {
        use crate::grammar_testing::accepts;
        use crate::tools::ToolFormat;
        let harmony = ReasoningFormat::Harmony;
        let g = harmony.grammar(Grammar::JsonObject, false);
        let think = "<|channel|>analysis<|message|>A {1<|end|><|start|>assistant";
        assert!(accepts(&g, "<|channel|>final<|message|>{\"a\": 1}"));
        assert!(accepts(
            &g,
            &format!("{think}<|channel|>final<|message|>{{}}")
        ));
        assert!(!accepts(&g, "{}"));
        assert!(!accepts(&g, "<|channel|>final<|message|>not JSON"));
        assert!(!accepts(
            &g,
            &format!("{think}<|channel|>commentary<|message|>{{}}")
        ));
        let offered = [("f", serde_json::json!({"type": "object"}))];
        let tools = ToolFormat::Harmony.calls_grammar(&offered, true, false);
        assert_eq!(harmony.grammar(tools.clone(), false), tools);
    }

    /// A harmony reply's `analysis` messages take at most the budget's tokens (its header
    /// not counted), then `<|end|>` is written; the next message is not reasoning again.
    #[test]
    fn a_harmony_budget_ends_the_reasoning() {
        use crate::grammar_testing::accepts;
        let harmony = ReasoningFormat::Harmony;
        let g = harmony.budgeted(None, false, 2).unwrap();
        let think = |r: &str| format!("<|channel|>analysis<|message|>{r}<|end|><|start|>assistant");
        let final_ = "<|channel|>final<|message|>Done.";
        assert!(accepts(&g, &format!("{}{final_}", think("ab"))));
        assert!(accepts(&g, &format!("{}{final_}", think("a"))));
        assert!(!accepts(&g, &format!("{}{final_}", think("abc"))));
        assert!(accepts(&g, final_));
        let call = " to=functions.f<|channel|>commentary json<|message|>{}";
        assert!(accepts(&g, &format!("{}{call}", think(""))));
        // Reasoning again straight after: refused by the grammar.
        let again = format!("{}{}", think("a"), think("b"));
        assert!(!accepts(&g, &format!("{again}{final_}")));
        // After a preamble the budget's rest still holds: the first message takes `a` and
        // its `<|end|>` (several tokens of this vocabulary), the next 1 token and its `<|end|>`.
        let end = crate::grammar_testing::tiny_tokenizer_with(&[]).encode("<|end|>", false);
        let g = harmony
            .budgeted(None, false, 2 + end.unwrap().len())
            .unwrap();
        let preamble = "<|channel|>commentary<|message|>Hi<|end|><|start|>assistant";
        let later = format!("{}{preamble}{}{final_}", think("a"), think("b"));
        assert!(accepts(&g, &later));
        let later = format!("{}{preamble}{}{final_}", think("a"), think("bc"));
        assert!(!accepts(&g, &later));
        // A tools grammar (framed in messages already): the call after the budget's end.
        let offered = [("f", serde_json::json!({"type": "object"}))];
        let tools = crate::tools::ToolFormat::Harmony.calls_grammar(&offered, false, false);
        let g = harmony.budgeted(Some(tools), false, 2).unwrap();
        let call = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}";
        assert!(accepts(&g, &format!("{}{call}", think("ab"))));
        assert!(!accepts(&g, &format!("{}{call}", think("abc"))));
        assert!(!accepts(&g, &format!("{}{final_}", think("ab"))));
        // With a grammar, the final message holds to it.
        let g = harmony
            .budgeted(Some(Grammar::JsonObject), false, 1)
            .unwrap();
        let json = "<|channel|>final<|message|>{}";
        assert!(accepts(&g, &format!("{}{json}", think("a"))));
        assert!(!accepts(&g, &format!("{}{json}", think("ab"))));
        assert!(!accepts(&g, &format!("{}{final_}", think("a"))));
    }

    #[test]
    fn grammars_hold_after_the_reasoning() {
        let g = Grammar::JsonObject;
        assert_eq!(ReasoningFormat::None.grammar(g.clone(), true), g);
        assert_eq!(
            ReasoningFormat::Think.grammar(g.clone(), true),
            Grammar::AfterReasoning {
                opened: true,
                grammar: Box::new(g.clone())
            }
        );
        assert_eq!(ReasoningFormat::None.budgeted(None, true, 9), None);
        let budgeted = ReasoningFormat::Think.budgeted(Some(g.clone()), false, 9);
        let after = ReasoningFormat::Think.grammar(g, false);
        assert_eq!(
            budgeted,
            Some(Grammar::Budgeted {
                tags: ReasoningTags::Think,
                tokens: 9,
                opened: false,
                grammar: Box::new(after)
            })
        );
    }

    #[test]
    fn held_back_text_is_let_out_never_taken_back() {
        let mut s = ReasoningFormat::Think.stream(false);
        assert_eq!(s.push("<th", false), Split::default());
        assert_eq!(s.push("ink>\nA </th", false).reasoning, "A ");
        // `</th` was held back and is the reasoning's after all.
        assert_eq!(s.push("ing>", false).reasoning, "</thing>");
        assert_eq!(s.push("\n\n", false), Split::default());
        let out = s.push("</think>\nB", false);
        assert_eq!((out.reasoning.as_str(), out.content.as_str()), ("", "B"));
        // Off: everything is answer, at once.
        let mut off = ReasoningFormat::None.stream(false);
        assert_eq!(off.push("<think>x", false).content, "<think>x");
    }

    #[test]
    fn the_format_is_read_from_the_template() {
        let t = |src: &str| ChatTemplate::new(src, "", "", "test").unwrap();
        let qwen3 = "{{ '<think>\\n' + r + '\\n</think>\\n\\n' }}";
        assert_eq!(
            ReasoningFormat::detect(Some(&t(qwen3))),
            ReasoningFormat::Think
        );
        assert_eq!(
            ReasoningFormat::detect(Some(&t("{{ x }}"))),
            ReasoningFormat::None
        );
        assert_eq!(ReasoningFormat::detect(None), ReasoningFormat::None);
    }
}
