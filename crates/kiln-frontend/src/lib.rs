//! kiln-frontend: what every way of talking to kiln shares, so the server, the CLI, the
//! browser crate and the desktop app behave alike: generation parameters checked and filled
//! from the model's own defaults ([`GenerationParams`] to [`GenSpec`]), prompt checks and chat
//! rendering ([`Frontend`]), and generated text ([`TextStream`]: incremental detokenization and
//! stop strings). No GPU, no threads, no I/O; builds for wasm32.

mod detokenize;
mod frontend;
mod params;
mod stop;
mod text;

pub use detokenize::IncrementalDecoder;
pub use frontend::Frontend;
pub use params::{
    GenSpec, GenerationParams, MAX_N, MAX_TOP_LOGPROBS, ParamError, StopSpec, base_sampling,
};
pub use stop::{StopMatcher, StopOutput};
pub use text::{Piece, TextStream};
