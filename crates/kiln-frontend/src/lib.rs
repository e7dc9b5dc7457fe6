//! kiln-frontend: what every way of talking to kiln shares, so the server, the CLI, the browser
//! crate and the desktop app behave alike: generation parameters checked and filled from the
//! model's own defaults ([`GenerationParams`] to [`GenSpec`]), prompt checks and chat rendering
//! ([`Frontend`]), structured-output requests ([`requested_grammar`]), tool calls ([`tools`]: the
//! plan, each model's call syntax, a conversation's past calls, replies read as calls, whole or as
//! they stream; [`ReplyReader`]), log-probabilities as OpenAI writes them ([`logprob_entry`]), and
//! generated text ([`TextStream`]: incremental detokenization and stop strings;
//! [`ReasoningStream`]: reasoning set apart from the answer), a long conversation fitted to
//! the context ([`Fitted`]) and embeddings ([`unit_length`]). No GPU, no threads, no I/O; builds
//! for wasm32.

mod detokenize;
mod embedding;
mod fit;
mod frontend;
#[cfg(test)]
mod grammar_testing;
mod harmony;
mod logprobs;
mod params;
mod reasoning;
mod reply;
mod stop;
mod structural_tag;
mod structured;
mod text;
mod token_fields;
pub mod tools;

pub use detokenize::IncrementalDecoder;
pub use embedding::unit_length;
pub use fit::Fitted;
pub use frontend::{ChatExtras, Ending, Frontend};
pub use logprobs::{chat_logprobs, logprob_entry, token_name, token_text};
pub use params::{
    GenSpec, GenerationParams, MAX_N, MAX_TOP_LOGPROBS, ParamError, StopSpec, base_sampling,
};
pub use reasoning::{ReasoningFormat, ReasoningStream, Split};
pub use reply::{ReplyPart, ReplyReader};
pub use stop::{StopMatcher, StopOutput, partial_suffix};
pub use structured::requested_grammar;
pub use text::{Piece, TextStream};
