//! The contract between kiln's scheduler (CPU, no GPU dependency) and its model runner (GPU).
//!
//! Each step the scheduler produces one [`StepBatch`]; the runner executes it as one forward
//! pass plus sampling and returns one [`SampledToken`] per sequence that asked to be sampled.
//! Nothing else crosses that boundary.

mod batch;
mod sampling;

pub use batch::{BlockCopy, SeqInBatch, StepBatch, BLOCK_SIZE};
pub use sampling::{mask_words, LogprobsMode, PenaltyToken, SampleSpec, SampledToken, SamplingParams, TokenMask};
