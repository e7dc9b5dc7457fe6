//! Test helpers for grammars the front end writes: does a grammar let a text through, token
//! by token, with the tiny tokenizer.

use kiln_core::Grammar;

/// The tiny tokenizer with `specials` as more special tokens.
pub fn tiny_tokenizer_with(specials: &[&str]) -> kiln_model::Tokenizer {
    let json = kiln_model::testing::tiny_tokenizer::tokenizer_json_with(specials);
    let bytes = serde_json::to_vec(&json).unwrap();
    kiln_model::Tokenizer::from_json_bytes(&bytes, "tiny").unwrap()
}

/// Whether `grammar` lets `ids`, then `tok`'s tokens of `text`, through, then EOS.
pub fn accepts_ids(
    tok: &kiln_model::Tokenizer,
    grammar: &Grammar,
    ids: &[u32],
    text: &str,
) -> bool {
    let eos = kiln_model::testing::tiny_tokenizer::eos_id();
    let factory = kiln_engine::ConstraintFactory::new(tok, &[eos], tok.vocab_size()).unwrap();
    let mut c = factory.compile(grammar).unwrap();
    let text_ids = tok.encode(text, false).unwrap();
    for t in ids.iter().copied().chain(text_ids) {
        if !c.allows(t).unwrap() {
            return false;
        }
        c.consume(t).unwrap();
    }
    c.allows(eos).unwrap()
}

/// Whether `grammar` lets the tiny tokenizer's tokens of `text` through, then EOS.
pub fn accepts(grammar: &Grammar, text: &str) -> bool {
    accepts_ids(&tiny_tokenizer_with(&[]), grammar, &[], text)
}
