//! The contract between kiln's scheduler (CPU, no GPU dependency) and its model runner (GPU).
//!
//! Each step the scheduler produces one [`StepBatch`]; the runner executes it as one forward
//! pass plus sampling and returns one [`SampledToken`] per sequence that asked to be sampled,
//! then one per scored prompt row ([`PromptScore`]). Nothing else crosses that boundary. The
//! one state the runner keeps between steps is its rows, one per running sequence: a block
//! table and a penalty list, which batches write by difference ([`SeqInBatch::table_row`],
//! [`PenaltyWrites`]; [`BlockTables`] and [`PenaltyLists`] are host copies kept the same way).

mod batch;
mod grammar;
mod penalties;
mod sampling;
mod token_filter;

pub use batch::{
    BLOCK_SIZE, BlockCopy, BlockTables, MAX_DRAFTS, NO_BLOCK, PrevToken, PromptScore, SeqInBatch,
    StepBatch,
};
pub use grammar::{Grammar, ReasoningTags, compact_schema, lark_string, regex_escape};
pub use penalties::{PENALTY_PAGE, PenaltyLists, PenaltyToken, PenaltyWrites};
pub use sampling::{LogprobsMode, SampleSpec, SampledToken, SamplingParams, TokenMask, mask_words};
pub use token_filter::TokenFilter;
