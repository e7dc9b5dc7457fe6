//! Grammar-constrained decoding with llguidance: one [`ConstraintFactory`] per model (built
//! once from the tokenizer's token bytes), one [`Constraint`] (an llguidance matcher) per
//! sequence. Each step the engine asks every constrained sequence for its allowed-token
//! bitmask while the GPU runs the forward pass, the sampler masks with it, and the sampled
//! token is fed back. Any matcher error fails that request (fail closed). A reasoning budget
//! (`reasoning_budget.rs`) rides on the matcher, narrowing its mask to `</think>` once spent.

use std::sync::Arc;

use kiln_core::{
    Grammar, ReasoningTags, TokenFilter, TokenMask, compact_schema, lark_string, mask_words,
};
use kiln_model::Tokenizer;
use llguidance::api::{GrammarWithLexer, TopLevelGrammar};
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::json;

use crate::reasoning_budget::Budget;

/// The llguidance grammar of `g` (JSON with compact separators).
fn to_llguidance(g: &Grammar) -> TopLevelGrammar {
    match g {
        Grammar::JsonObject => {
            TopLevelGrammar::from_json_schema(compact_schema(json!({"type": "object"})))
        }
        Grammar::JsonSchema(s) => TopLevelGrammar::from_json_schema(compact_schema(s.clone())),
        Grammar::Regex(r) => TopLevelGrammar::from_grammar(GrammarWithLexer::from_regex(r)),
        Grammar::Choice(c) => {
            let alts: Vec<String> = c.iter().map(|s| lark_string(s)).collect();
            TopLevelGrammar::from_lark(format!("start: {}", alts.join(" | ")))
        }
        Grammar::Lark(g) => TopLevelGrammar::from_lark(g.clone()),
        // The budget is the constraint's (see `ConstraintFactory::compile`).
        Grammar::Budgeted { grammar, .. } => to_llguidance(grammar),
        Grammar::AfterReasoning { opened, grammar } => {
            // The reasoning up to the first `</think>` (a lazy lexeme, which ends where the
            // tag does), whitespace, then the answer's grammar.
            let block = if *opened {
                "reasoning ws?"
            } else {
                "(\"<think>\" reasoning ws?)?"
            };
            let frame = format!(
                "start: {block} @answer\nreasoning[lazy]: /(?s:.*)<\\/think>/\nws: /[ \\t\\r\\n]+/\n"
            );
            within(frame, grammar)
        }
        Grammar::Within { frame, grammar } => within(frame.clone(), grammar),
    }
}

/// `grammar` inside `frame`, a Lark grammar that references it by name as `@answer`.
fn within(frame: String, grammar: &Grammar) -> TopLevelGrammar {
    let mut answer = to_llguidance(grammar);
    answer.grammars[0].name = Some("answer".into());
    let mut top = TopLevelGrammar::from_lark(frame);
    top.grammars.append(&mut answer.grammars);
    top
}

/// Compiles grammars for one model's vocabulary.
pub struct ConstraintFactory {
    factory: Arc<ParserFactory>,
    vocab: usize,
    /// Each token's bytes, and for reasoning budgets each kind of reasoning's closing tag as
    /// tokens (see [`closing_tag`]).
    words: Arc<Vec<Vec<u8>>>,
    think_close: Arc<[Vec<u32>]>,
    harmony_close: Arc<[Vec<u32>]>,
}

/// `tag` as tokens from each of its bytes on (`[k]` writes its bytes from `k`), or only whole
/// where the vocabulary writes it as one token (no text ends with part of that).
fn closing_tag(tokenizer: &Tokenizer, tag: &str) -> Result<Arc<[Vec<u32>]>, String> {
    let whole = tokenizer.encode(tag, false).map_err(|e| e.to_string())?;
    if whole.len() == 1 {
        return Ok(vec![whole].into());
    }
    let closes = (0..tag.len()).map(|k| tokenizer.encode(&tag[k..], false));
    let closes = closes.collect::<Result<Vec<_>, _>>();
    Ok(closes.map_err(|e| e.to_string())?.into())
}

impl ConstraintFactory {
    /// From the model's tokenizer, its EOS ids and the model's vocabulary size (the logits'
    /// width, which may exceed the tokenizer's: the extra ids are never allowed).
    pub fn new(
        tokenizer: &Tokenizer,
        eos_token_ids: &[u32],
        model_vocab: usize,
    ) -> Result<Self, String> {
        let mut words = tokenizer.token_bytes();
        words.resize(model_vocab.max(words.len()), Vec::new());
        let eos = *eos_token_ids
            .first()
            .ok_or("the model has no EOS token, which constrained decoding needs")?;
        let info = TokRxInfo::new(words.len() as u32, eos);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(eos_token_ids);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| format!("constrained decoding: {e}"))?;
        factory.set_stderr_log_level(0);
        let close = |tags: ReasoningTags| {
            closing_tag(tokenizer, tags.close()).map_err(|e| format!("constrained decoding: {e}"))
        };
        Ok(Self {
            factory: Arc::new(factory),
            vocab: words.len(),
            words: Arc::new(words),
            think_close: close(ReasoningTags::Think)?,
            harmony_close: close(ReasoningTags::Harmony)?,
        })
    }

    /// A fresh matcher for one sequence; the error names what in the grammar is wrong.
    pub fn compile(&self, grammar: &Grammar) -> Result<Constraint, String> {
        let parser = self
            .factory
            .create_parser(to_llguidance(grammar))
            .map_err(|e| e.to_string())?;
        let matcher = Matcher::new(Ok(parser));
        let budget = match grammar {
            Grammar::Budgeted {
                tags,
                tokens,
                opened,
                ..
            } => {
                let closes = match tags {
                    ReasoningTags::Think => &self.think_close,
                    ReasoningTags::Harmony => &self.harmony_close,
                };
                let budget = Budget::new(*tags, *tokens, *opened, closes.clone());
                Some((budget, self.words.clone()))
            }
            _ => None,
        };
        Ok(Constraint {
            matcher: Some(matcher),
            words: mask_words(self.vocab),
            budget,
            filter: TokenFilter::default(),
            allowed: None,
            recent: Vec::new(),
        })
    }
}

/// One sequence's matcher and token filter.
pub struct Constraint {
    /// The grammar's matcher; `None`: only the filter constrains.
    matcher: Option<Matcher>,
    words: usize,
    /// A reasoning budget, with each token's bytes.
    budget: Option<(Budget, Arc<Vec<Vec<u8>>>)>,
    filter: TokenFilter,
    /// The filter's allow list as a mask, made once.
    allowed: Option<TokenMask>,
    /// The output's last tokens, as many as the filter reads.
    recent: Vec<u32>,
}

impl Constraint {
    /// A constraint of `filter` alone, for a vocabulary of `vocab` tokens.
    pub fn filter_only(filter: TokenFilter, vocab: usize) -> Self {
        let only = Self {
            matcher: None,
            words: mask_words(vocab),
            budget: None,
            filter: TokenFilter::default(),
            allowed: None,
            recent: Vec::new(),
        };
        only.with_filter(filter)
    }

    /// This constraint with `filter` applied after its grammar.
    pub fn with_filter(self, filter: TokenFilter) -> Self {
        Self {
            allowed: filter.allowed_mask(self.words),
            filter,
            ..self
        }
    }

    /// The tokens allowed next (only EOS once the grammar is complete and nothing may
    /// follow), less those the filter forbids.
    pub fn mask(&mut self) -> Result<TokenMask, String> {
        let mut words = self.grammar_mask()?;
        if let Some(keep) = &self.allowed {
            words.iter_mut().zip(keep).for_each(|(w, k)| *w &= k);
        }
        self.filter.ban(&mut words, &self.recent);
        Ok(words)
    }

    /// The tokens the grammar allows next (every token without one).
    fn grammar_mask(&mut self) -> Result<TokenMask, String> {
        let Some(matcher) = &mut self.matcher else {
            return Ok(vec![u32::MAX; self.words]);
        };
        let v = matcher.compute_mask_or_eos().map_err(|e| e.to_string())?;
        let mut words = v.as_slice().to_vec();
        words.resize(self.words, 0);
        if let Some((t, tag)) = self
            .budget
            .as_ref()
            .and_then(|(b, _)| Some((b.forced()?, b.tag())))
        {
            let (word, bit) = (t as usize / 32, 1 << (t % 32));
            if words.get(word).is_none_or(|w| w & bit == 0) {
                return Err(format!(
                    "the reasoning budget is spent, but the grammar does not allow `{tag}` (token {t}) here"
                ));
            }
            words.fill(0);
            words[word] = bit;
        }
        Ok(words)
    }

    /// Whether `token` may come next.
    pub fn allows(&mut self, token: u32) -> Result<bool, String> {
        let mask = self.mask()?;
        Ok(mask
            .get(token as usize / 32)
            .is_some_and(|w| w & (1 << (token % 32)) != 0))
    }

    /// Words of this sequence's masks.
    pub fn mask_len(&self) -> usize {
        self.words
    }

    /// Advances past `token`; an error means the token broke the grammar.
    pub fn consume(&mut self, token: u32) -> Result<(), String> {
        if let Some(m) = &mut self.matcher {
            m.consume_token(token).map_err(|e| e.to_string())?;
        }
        let keep = self.filter.context();
        if keep > 0 {
            self.recent.push(token);
            let extra = self.recent.len().saturating_sub(keep);
            self.recent.drain(..extra);
        }
        if let Some((budget, words)) = &mut self.budget {
            let bytes = words.get(token as usize).map_or(&[][..], Vec::as_slice);
            budget.consume(token, bytes);
        }
        Ok(())
    }

    /// Whether the output so far is a complete match.
    pub fn is_accepting(&mut self) -> bool {
        match &mut self.matcher {
            Some(m) => m.is_accepting().unwrap_or(false),
            None => true,
        }
    }

    /// Whether no more tokens may follow (the grammar is complete and closed).
    pub fn is_stopped(&self) -> bool {
        self.matcher.as_ref().is_some_and(Matcher::is_stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_model::testing::tiny_tokenizer;

    /// The tiny tokenizer and its factory.
    fn tiny() -> (Tokenizer, ConstraintFactory) {
        let json = serde_json::to_vec(&tiny_tokenizer::tokenizer_json()).unwrap();
        let tok = Tokenizer::from_json_bytes(&json, "tiny").unwrap();
        let eos = tiny_tokenizer::eos_id();
        let factory = ConstraintFactory::new(&tok, &[eos], tok.vocab_size()).unwrap();
        (tok, factory)
    }

    /// Whether `grammar` lets the tiny tokenizer's tokens of `text` through, then EOS.
    fn accepts(grammar: &Grammar, text: &str) -> bool {
        let (tok, factory) = tiny();
        let eos = tiny_tokenizer::eos_id();
        let mut c = factory.compile(grammar).unwrap();
        for t in tok.encode(text, false).unwrap() {
            if !c.allows(t).unwrap() {
                return false;
            }
            c.consume(t).unwrap();
        }
        c.allows(eos).unwrap()
    }

    #[test]
    fn a_grammar_after_reasoning_holds_once_the_block_closes() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}},
            "required": ["a"], "additionalProperties": false});
        let answer = r#"{"a": 1}"#;
        let kinds = [
            Grammar::JsonSchema(schema),
            Grammar::Regex(r#"\{"a": [0-9]\}"#.into()),
            Grammar::Choice(vec![answer.into()]),
            Grammar::Lark(format!("start: {}", lark_string(answer))),
        ];
        for inner in kinds {
            let after = |opened| Grammar::AfterReasoning {
                opened,
                grammar: Box::new(inner.clone()),
            };
            // The model opens the block, or not.
            let g = after(false);
            assert!(accepts(&g, answer), "{inner:?}");
            assert!(accepts(
                &g,
                &format!("<think>\n1 < 2, so a {{ }}\n</think>\n\n{answer}")
            ));
            assert!(accepts(&g, &format!("<think></think>{answer}")));
            assert!(!accepts(&g, "<think>\nstill thinking"), "{inner:?}");
            assert!(!accepts(
                &g,
                &format!("<think>x</think>\n{answer} and more")
            ));
            assert!(!accepts(&g, &format!("Sure: {answer}")), "{inner:?}");
            // The prompt opened it: the reasoning comes first, then the tag.
            let g = after(true);
            assert!(accepts(&g, &format!("Let me see.\n</think>\n\n{answer}")));
            assert!(accepts(&g, &format!("</think>{answer}")));
            assert!(!accepts(&g, answer), "{inner:?}");
            assert!(!accepts(&g, "Let me see."), "{inner:?}");
            // The answer's own grammar holds after the block.
            assert!(!accepts(&g, "x</think>{\"b\": 1}"), "{inner:?}");
        }
    }

    /// The tokens `c`'s mask allows.
    fn allowed(c: &mut Constraint) -> Vec<u32> {
        let mask = c.mask().unwrap();
        (0..mask.len() as u32 * 32)
            .filter(|&t| mask[t as usize / 32] & (1 << (t % 32)) != 0)
            .collect()
    }

    #[test]
    fn a_reasoning_budget_writes_the_closing_tag_once_spent() {
        let (tok, factory) = tiny();
        let eos = tiny_tokenizer::eos_id();
        let answer = Grammar::JsonObject;
        let g = |opened, tokens| Grammar::Budgeted {
            tags: ReasoningTags::Think,
            tokens,
            opened,
            grammar: Box::new(Grammar::AfterReasoning {
                opened,
                grammar: Box::new(answer.clone()),
            }),
        };
        let close = tok.encode("</think>", false).unwrap();
        let xyz = tok.encode("xyz", false).unwrap();
        assert_eq!(xyz.len(), 3);
        for (opened, lead) in [(true, ""), (false, "<think>")] {
            let mut c = factory.compile(&g(opened, 3)).unwrap();
            for t in tok.encode(&format!("{lead}xyz"), false).unwrap() {
                assert!(c.allows(t).unwrap());
                c.consume(t).unwrap();
            }
            // Spent: only the tag's tokens, in order.
            for &t in &close {
                assert_eq!(allowed(&mut c), [t]);
                c.consume(t).unwrap();
            }
            // Then the answer's grammar, free again.
            assert!(allowed(&mut c).len() > 1);
            for t in tok.encode("{}", false).unwrap() {
                c.consume(t).unwrap();
            }
            assert!(c.allows(eos).unwrap());
        }
        // A block closed within the budget (its closing tag's tokens count), or no block at
        // all, is not bounded.
        let mut c = factory.compile(&g(true, 1 + close.len())).unwrap();
        for t in tok.encode("x</think>{\"abcdef\": 1}", false).unwrap() {
            assert!(c.allows(t).unwrap());
            c.consume(t).unwrap();
        }
        let mut c = factory.compile(&g(false, 1)).unwrap();
        for t in tok.encode("{\"abcdef\": 1}", false).unwrap() {
            assert!(c.allows(t).unwrap());
            c.consume(t).unwrap();
        }
    }
}
