//! One step's batch: a flat list of tokens from many sequences, each sequence a contiguous
//! query segment that attends to its own paged KV context.

use crate::SampleSpec;

/// Tokens per KV-cache block. Every block table entry covers this many positions.
pub const BLOCK_SIZE: usize = 16;

/// A block-table entry for positions the sequence no longer holds: every layer slides and
/// these positions lie before the window of each token still to come, so no kernel reads
/// them (their block went back to the pool).
pub const NO_BLOCK: u32 = u32::MAX;

/// Most speculative tokens one segment may carry ([`SeqInBatch::drafts`]).
pub const MAX_DRAFTS: u32 = 15;

/// Everything the model runner needs to run one forward pass.
///
/// Tokens are flattened: sequence `s` owns `token_ids[seqs[s].query_start ..
/// seqs[s].query_start + seqs[s].query_len]`. A prefill chunk is a segment of many tokens, a
/// decode is a segment of one; both are handled by the same kernels in the same pass.
#[derive(Clone, Debug, Default)]
pub struct StepBatch {
    /// Input token ids, `T` of them.
    pub token_ids: Vec<u32>,
    /// Position of each token in its sequence (`T`).
    pub positions: Vec<u32>,
    /// KV cache slot of each token (`T`): `block_id * BLOCK_SIZE + offset_in_block`.
    pub slot_mapping: Vec<u32>,
    /// The sequences, in the order of their segments in `token_ids`.
    pub seqs: Vec<SeqInBatch>,
    /// Blocks to copy from the CPU tier into the GPU pool before the forward pass.
    pub swap_in: Vec<BlockCopy>,
    /// Blocks to copy from the GPU pool into the CPU tier before the forward pass
    /// (and so before any block in `swap_in` or in this step's slots can overwrite them).
    pub swap_out: Vec<BlockCopy>,
    /// Input tokens that the previous step sampled and the host has not seen yet (a step
    /// scheduled while the one before it runs): the runner takes each from that step's
    /// sampler output on the GPU, and `token_ids` holds a placeholder there. Such a token is
    /// the last of its sequence's history and is missing from its penalty list: the
    /// sampler counts it. In increasing order of `index`.
    pub prev_tokens: Vec<PrevToken>,
    /// Sampler rows whose final hidden state (after the last norm) comes back with their
    /// token ([`crate::SampledToken::hidden`]: an embedding), in increasing order.
    pub hidden_rows: Vec<u32>,
}

/// An input token taken from the previous step's output ([`StepBatch::prev_tokens`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrevToken {
    /// Index of the token in [`StepBatch::token_ids`].
    pub index: u32,
    /// Row of the previous step's sampler (its sampled sequences, in batch order) whose
    /// token this is.
    pub row: u32,
}

/// One sequence's segment of a [`StepBatch`].
///
/// Block tables are sent by difference: the runner keeps row `table_row` of its block tables
/// from step to step for the sequence that holds it, and a step writes only entries
/// `table_from..` of that row (all of them when the row was just given to the sequence, or
/// none when the table has not changed).
#[derive(Clone, Debug, Default)]
pub struct SeqInBatch {
    /// Index of this segment's first token in [`StepBatch::token_ids`].
    pub query_start: u32,
    /// Number of tokens in this segment (1 for a decode step).
    pub query_len: u32,
    /// Tokens of context after this step: cached tokens plus `query_len`.
    /// The segment's tokens sit at positions `context_len - query_len .. context_len`.
    pub context_len: u32,
    /// The runner's block-table row for this sequence; no two sequences of a step share one.
    pub table_row: u32,
    /// Index of the first block-table entry this step writes (`table_tail[0]`).
    pub table_from: u32,
    /// Entries `table_from..` of the sequence's block table: GPU block ids holding positions
    /// `0..context_len`, in order; [`NO_BLOCK`] for blocks wholly before the window of every
    /// layer (only with sliding windows on every layer).
    pub table_tail: Vec<u32>,
    /// Sample a token from the logits of this segment's last token, if set.
    pub sample: Option<SampleSpec>,
    /// Speculative tokens at the end of the segment (a decode's guesses of the tokens that
    /// follow its input): its last `drafts + 1` rows are all sampled with `sample`, row `i`
    /// of them drawing output token `draw_index + i`, its penalties counting the guesses
    /// before it. Only with `sample`, at most [`MAX_DRAFTS`], and not with a penalty list
    /// when raw log-probabilities are reported (the rows would share the list's per-entry
    /// scratch for raw logits on the runner).
    pub drafts: u32,
    /// Score prompt tokens: the log-probabilities of the tokens that follow some of this
    /// segment's rows (prompt logprobs), if set.
    pub score: Option<PromptScore>,
    /// The LoRA adapter the segment's tokens run through (the runner's slot), if any.
    pub lora: Option<u32>,
}

impl SeqInBatch {
    /// Rows of the sampler this segment's sampling takes: its last `drafts + 1` rows when
    /// sampled, else none.
    pub fn sampled_rows(&self) -> usize {
        if self.sample.is_some() {
            1 + self.drafts as usize
        } else {
            0
        }
    }
}

/// Rows of a segment whose logits score the prompt token that follows them: row
/// `first_row + i` of the segment is scored against `targets[i]`. A scored row is a row of
/// the sampler like a sampled one, with its token forced. The log-probabilities are of the
/// model's own logits (no temperature, penalty or mask).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptScore {
    /// Index, within the segment, of the first scored row.
    pub first_row: u32,
    /// The token after each scored row, in order.
    pub targets: Vec<u32>,
    /// Most likely alternatives to report per row (at most 20).
    pub top_logprobs: u32,
}

/// A block copy between the GPU pool and the CPU tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCopy {
    pub gpu_block: u32,
    pub cpu_block: u32,
}

impl StepBatch {
    /// Number of tokens in the batch.
    pub fn num_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// Number of sampled rows: one per sampled sequence and one per speculative token.
    pub fn num_samples(&self) -> usize {
        self.seqs.iter().map(SeqInBatch::sampled_rows).sum()
    }

    /// Number of scored prompt rows.
    pub fn num_scored(&self) -> usize {
        (self.seqs.iter().filter_map(|s| s.score.as_ref()))
            .map(|s| s.targets.len())
            .sum()
    }

    /// Checks the internal consistency of the batch. The runner calls this before running it,
    /// so that a scheduler bug shows up as a message, not as garbage on the GPU.
    pub fn validate(&self) -> Result<(), String> {
        let t = self.token_ids.len();
        if self.positions.len() != t || self.slot_mapping.len() != t {
            return Err(format!(
                "token_ids ({t}), positions ({}) and slot_mapping ({}) differ in length",
                self.positions.len(),
                self.slot_mapping.len()
            ));
        }
        let mut next = 0u32;
        for (i, s) in self.seqs.iter().enumerate() {
            if s.query_start != next || s.query_len == 0 {
                return Err(format!(
                    "sequence {i}: segment is not contiguous or is empty"
                ));
            }
            if s.context_len < s.query_len {
                return Err(format!("sequence {i}: context_len < query_len"));
            }
            let table_len = s.table_from as usize + s.table_tail.len();
            if table_len * BLOCK_SIZE < s.context_len as usize {
                return Err(format!(
                    "sequence {i}: {table_len} blocks cannot hold {} tokens",
                    s.context_len
                ));
            }
            if let Some(spec) = &s.sample {
                spec.penalties
                    .validate()
                    .map_err(|e| format!("sequence {i}: {e}"))?;
            }
            if s.drafts > 0 {
                let shared_scratch = (s.sample.as_ref()).map(|p| {
                    p.params.reports_raw_logprobs()
                        && (p.params.has_penalties() || p.penalties.len > 0)
                });
                if shared_scratch != Some(false)
                    || s.score.is_some()
                    || s.drafts >= s.query_len
                    || s.drafts > MAX_DRAFTS
                {
                    return Err(format!(
                        "sequence {i}: {} speculative tokens in a segment of {} that is not a \
                         plain sampled one",
                        s.drafts, s.query_len
                    ));
                }
            }
            if let Some(score) = &s.score {
                // A sampled segment's last row is sampled, not scored.
                let rows = s.query_len - u32::from(s.sample.is_some());
                if score.first_row as usize + score.targets.len() > rows as usize {
                    return Err(format!(
                        "sequence {i}: {} scored rows from row {} of {} rows to score",
                        score.targets.len(),
                        score.first_row,
                        rows
                    ));
                }
            }
            next += s.query_len;
        }
        let mut rows: Vec<u32> = self.seqs.iter().map(|s| s.table_row).collect();
        rows.sort_unstable();
        if let Some(w) = rows.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("two sequences share block-table row {}", w[0]));
        }
        if next as usize != t {
            return Err(format!("segments cover {next} tokens, batch has {t}"));
        }
        if let Some(p) = self.prev_tokens.iter().find(|p| p.index as usize >= t) {
            return Err(format!(
                "token {} taken from the previous step is past the batch's {t} tokens",
                p.index
            ));
        }
        if self
            .prev_tokens
            .windows(2)
            .any(|w| w[0].index >= w[1].index)
        {
            return Err("tokens taken from the previous step are not in increasing order".into());
        }
        Ok(())
    }
}

/// A host-side copy of the runner's block tables, kept by applying each step's writes (for
/// runners and fakes that read tables on the CPU).
#[derive(Clone, Debug, Default)]
pub struct BlockTables {
    rows: Vec<Vec<u32>>,
}

impl BlockTables {
    /// Applies `seq`'s writes to its row and returns the row's first `blocks` entries (the
    /// whole table of a sequence whose context needs that many). Panics where the writes
    /// leave a gap or the row is shorter (a scheduler bug).
    pub fn apply(&mut self, seq: &SeqInBatch) -> &[u32] {
        let r = seq.table_row as usize;
        if self.rows.len() <= r {
            self.rows.resize_with(r + 1, Vec::new);
        }
        let row = &mut self.rows[r];
        let from = seq.table_from as usize;
        assert!(
            from <= row.len(),
            "row {r}: writing from entry {from} of {}",
            row.len()
        );
        row.truncate(from);
        row.extend_from_slice(&seq.table_tail);
        &row[..(seq.context_len as usize).div_ceil(BLOCK_SIZE)]
    }
}
