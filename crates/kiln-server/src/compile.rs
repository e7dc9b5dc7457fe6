//! Compiling structured-output grammars (read from the request by kiln-frontend's
//! `requested_grammar`) into one matcher per choice. A schema or grammar llguidance cannot
//! compile is a 400 naming the problem.

use kiln_engine::{CompileError, Constraint, Grammar};

use crate::error::ApiError;
use crate::state::AppState;

impl AppState {
    /// `n` matchers for `grammar` (one per choice); `param` names the field in a 400.
    pub fn compile(
        &self,
        grammar: &Grammar,
        n: usize,
        param: &str,
    ) -> Result<Vec<Constraint>, ApiError> {
        let m = &self.model;
        (0..n)
            .map(|_| {
                let c =
                    self.constraints
                        .compile(grammar, &m.tokenizer, &m.eos_token_ids, m.vocab_size);
                c.map_err(|e| match e {
                    CompileError::Model(e) => ApiError::internal(e),
                    CompileError::Grammar(e) => {
                        ApiError::bad_param(param, format!("the {param} cannot be compiled: {e}"))
                    }
                })
            })
            .collect()
    }
}
