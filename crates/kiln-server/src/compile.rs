//! Compiling structured-output grammars (read from the request by kiln-frontend's
//! `requested_grammar`) into one matcher per choice. A schema or grammar llguidance cannot
//! compile is a 400 naming the problem.

use kiln_engine::{Constraint, ConstraintFactory, Grammar};

use crate::error::ApiError;
use crate::state::AppState;

impl AppState {
    /// The model's grammar compiler, built on first use.
    pub fn constraint_factory(&self) -> Result<&ConstraintFactory, ApiError> {
        self.constraints
            .get_or_init(|| {
                ConstraintFactory::new(
                    &self.model.tokenizer,
                    &self.model.eos_token_ids,
                    self.model.vocab_size,
                )
            })
            .as_ref()
            .map_err(|e| ApiError::internal(e.clone()))
    }

    /// `n` matchers for `grammar` (one per choice); `param` names the field in a 400.
    pub fn compile(
        &self,
        grammar: &Grammar,
        n: usize,
        param: &str,
    ) -> Result<Vec<Constraint>, ApiError> {
        let f = self.constraint_factory()?;
        (0..n)
            .map(|_| {
                f.compile(grammar).map_err(|e| {
                    ApiError::bad_param(param, format!("the {param} cannot be compiled: {e}"))
                })
            })
            .collect()
    }
}
