//! A model's grammar compiler, built on the first structured request: building it reads the
//! whole vocabulary, which a server or a page without structured outputs should not pay for.
//! The server, the CLI and the browser engine each hold one.

use std::sync::OnceLock;

use kiln_core::Grammar;
use kiln_model::Tokenizer;

use crate::{Constraint, ConstraintFactory};

/// A [`ConstraintFactory`] made on first use, or the reason it could not be made.
#[derive(Default)]
pub struct GrammarCompiler(OnceLock<Result<ConstraintFactory, String>>);

/// Why a grammar did not become a constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileError {
    /// The compiler could not be made for this model (its tokenizer or EOS tokens): not the
    /// request's fault.
    Model(String),
    /// The grammar, schema or pattern does not compile; the text names what is wrong.
    Grammar(String),
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::Model(e) => f.write_str(e),
            CompileError::Grammar(e) => write!(f, "the grammar cannot be compiled: {e}"),
        }
    }
}

impl GrammarCompiler {
    /// A fresh matcher for `grammar`, from the compiler for the model whose tokenizer, EOS
    /// ids and vocabulary size these are (read only the first time).
    pub fn compile(
        &self,
        grammar: &Grammar,
        tokenizer: &Tokenizer,
        eos_token_ids: &[u32],
        vocab_size: usize,
    ) -> Result<Constraint, CompileError> {
        self.0
            .get_or_init(|| ConstraintFactory::new(tokenizer, eos_token_ids, vocab_size))
            .as_ref()
            .map_err(|e| CompileError::Model(e.clone()))?
            .compile(grammar)
            .map_err(CompileError::Grammar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_model::testing::tiny_tokenizer;

    fn tiny() -> Tokenizer {
        let json = serde_json::to_vec(&tiny_tokenizer::tokenizer_json()).unwrap();
        Tokenizer::from_json_bytes(&json, "tiny").unwrap()
    }

    #[test]
    fn tells_a_bad_grammar_from_a_model_it_cannot_constrain() {
        let tok = tiny();
        let eos = [tiny_tokenizer::eos_id()];
        let compiler = GrammarCompiler::default();
        let good = Grammar::Regex("[a-c]+".into());
        assert!(
            compiler
                .compile(&good, &tok, &eos, tok.vocab_size())
                .is_ok()
        );
        let bad = Grammar::Regex("(".into());
        let Err(e) = compiler.compile(&bad, &tok, &eos, tok.vocab_size()) else {
            panic!("an unclosed group compiled");
        };
        assert!(matches!(e, CompileError::Grammar(_)), "{e:?}");
        assert!(e.to_string().starts_with("the grammar cannot be compiled"));

        // No EOS token: no grammar compiles, and every request is told why, not just the first.
        let none = GrammarCompiler::default();
        for _ in 0..2 {
            let Err(e) = none.compile(&good, &tok, &[], tok.vocab_size()) else {
                panic!("a model without EOS got a constraint");
            };
            assert!(
                matches!(&e, CompileError::Model(m) if m.contains("EOS")),
                "{e:?}"
            );
        }
    }
}
