//! The per-step inputs on the GPU: the batch description flattened into fixed-size buffers
//! that every launch binds once, rewritten with `queue.write_buffer` each step. The block
//! tables are the exception: a row per sequence, kept between steps and written by
//! difference ([`kiln_core::SeqInBatch::table_row`]): the step's writes go up as one list
//! that the forward pass's first launch applies (`table_writes.wgsl`), since a
//! `write_buffer` per changed row costs the host microseconds each. The penalty lists are
//! kept the same way, beside the rows (`penalty_store.rs`).

use std::sync::Mutex;

use bytemuck::{Pod, Zeroable};
use kiln_core::StepBatch;

use crate::ops::{Runs, SampleUniform};
use crate::penalty_store::PenaltyStore;
use crate::{GpuContext, GpuError};

/// Twin of the WGSL `Step` struct every kernel reads.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, Default)]
pub struct StepUniform {
    pub num_tokens: u32,
    pub num_seqs: u32,
    pub num_samples: u32,
    /// Input tokens taken from the previous step's output ([`kiln_core::PrevToken`]).
    pub num_prev: u32,
}

/// Capacities the buffers were sized for.
#[derive(Clone, Copy, Debug)]
pub struct StepCapacity {
    pub tokens: usize,
    pub seqs: usize,
    /// Rows of the sampler: sampled sequences with their guesses, and scored prompt rows
    /// (at least `seqs`).
    pub rows: usize,
    /// Entries of a block-table row: the blocks of the longest sequence.
    pub blocks_per_seq: usize,
    /// Pages of [`kiln_core::PENALTY_PAGE`] entries in the penalty pool, which the running
    /// sequences' penalty lists share.
    pub penalty_pages: usize,
    /// Pages one sequence's penalty list may take.
    pub penalty_pages_per_seq: usize,
}

/// A step's counts, and the runs of block-table and penalty-list writes it sends (which the
/// writes launches apply).
pub struct Uploaded {
    pub counts: StepUniform,
    /// Whether some token runs through a LoRA adapter (its slots were written).
    pub lora: bool,
    pub table_runs: usize,
    pub penalty_runs: usize,
}

pub struct StepInputs {
    pub cap: StepCapacity,
    pub step: wgpu::Buffer,
    pub token_ids: wgpu::Buffer,
    pub positions: wgpu::Buffer,
    pub slot_mapping: wgpu::Buffer,
    pub token_seq: wgpu::Buffer,
    pub seq_info: wgpu::Buffer,
    /// `seqs` rows of `blocks_per_seq` entries, each kept for the sequence that holds it.
    pub block_tables: wgpu::Buffer,
    /// Entries each row of `block_tables` holds, so that a write past them or a table
    /// shorter than its context is an error, not a read of another sequence's blocks.
    table_lens: Mutex<Vec<u32>>,
    /// The step's block-table writes as runs: a count, a `(first entry, length, offset)`
    /// header per run, then the runs' blocks (`table_writes.wgsl`).
    pub table_writes: wgpu::Buffer,
    pub sample_rows: wgpu::Buffer,
    pub sampling: wgpu::Buffer,
    pub penalties: PenaltyStore,
    /// `(token index, previous sampler row)` pairs of the inputs taken from the previous
    /// step's output.
    pub prev_tokens: wgpu::Buffer,
    /// Each token's LoRA adapter slot (`u32::MAX`: none), written on steps that have one.
    pub lora_slots: wgpu::Buffer,
}

impl StepInputs {
    pub fn new(ctx: &GpuContext, cap: StepCapacity) -> Self {
        let u32s = |label: &str, n: usize| ctx.storage(label, n as u64 * 4);
        Self {
            cap,
            step: ctx.uniform_init("step", bytemuck::bytes_of(&StepUniform::default())),
            token_ids: u32s("token_ids", cap.tokens),
            positions: u32s("positions", cap.tokens),
            slot_mapping: u32s("slot_mapping", cap.tokens),
            token_seq: u32s("token_seq", cap.tokens),
            seq_info: u32s("seq_info", cap.seqs * 4),
            block_tables: u32s("block_tables", cap.seqs * cap.blocks_per_seq),
            table_lens: Mutex::new(vec![0; cap.seqs]),
            table_writes: u32s(
                "table_writes",
                1 + 3 * cap.seqs + cap.seqs * cap.blocks_per_seq,
            ),
            sample_rows: u32s("sample_rows", cap.rows),
            sampling: ctx.storage(
                "sampling",
                (cap.rows * std::mem::size_of::<SampleUniform>()) as u64,
            ),
            penalties: PenaltyStore::new(
                ctx,
                cap.seqs,
                cap.penalty_pages,
                cap.penalty_pages_per_seq,
                penalty_writes_words(cap),
            ),
            prev_tokens: u32s("prev_tokens", cap.seqs * 2),
            lora_slots: u32s("lora_slots", cap.tokens),
        }
    }

    /// Points sampled row `row` at row `mask_row` of the mask buffer (queued like the upload).
    pub fn set_mask_row(&self, ctx: &GpuContext, row: usize, mask_row: u32) {
        let offset = row * std::mem::size_of::<SampleUniform>()
            + std::mem::offset_of!(SampleUniform, mask_row);
        ctx.write(&self.sampling, offset as u64, bytemuck::bytes_of(&mask_row));
    }

    /// Checks `batch` against the capacities and queues its upload.
    /// Every block-table row counts as holding nothing again (after the runner's warm-up,
    /// whose sequence no later step continues).
    pub fn clear_tables(&self) {
        self.table_lens.lock().unwrap().fill(0);
    }

    pub fn upload(&self, ctx: &GpuContext, batch: &StepBatch) -> Result<Uploaded, GpuError> {
        batch.validate().map_err(GpuError::Batch)?;
        let t = batch.num_tokens();
        let check = |what, needed: usize, max: usize| {
            if needed > max {
                Err(GpuError::Capacity { what, needed, max })
            } else {
                Ok(())
            }
        };
        check("tokens", t, self.cap.tokens)?;
        check("sequences", batch.seqs.len(), self.cap.seqs)?;

        let mut token_seq = Vec::with_capacity(t);
        let mut seq_info = Vec::with_capacity(batch.seqs.len() * 4);
        let mut sample_rows = Vec::new();
        let mut sampling = Vec::new();
        let mut lists = Vec::new();
        let mut runs = Runs::default();
        let mut table_lens = self.table_lens.lock().unwrap();
        let mut new_lens = Vec::with_capacity(batch.seqs.len());
        for (s, seq) in batch.seqs.iter().enumerate() {
            let row = seq.table_row as usize;
            check("block-table rows", row + 1, self.cap.seqs)?;
            let table_len = seq.table_from as usize + seq.table_tail.len();
            check("block-table entries", table_len, self.cap.blocks_per_seq)?;
            if seq.table_from > table_lens[row] {
                return Err(GpuError::Batch(format!(
                    "sequence {s}: writes block-table row {row} from entry {}, but it holds {}",
                    seq.table_from, table_lens[row]
                )));
            }
            new_lens.push((row, table_len as u32));
            let row_start = row * self.cap.blocks_per_seq;
            if !seq.table_tail.is_empty() {
                let first = (row_start + seq.table_from as usize) as u32;
                runs.push(first, seq.table_tail.iter().copied());
            }
            token_seq.extend(std::iter::repeat_n(s as u32, seq.query_len as usize));
            seq_info.extend([
                seq.query_start,
                seq.query_len,
                seq.context_len,
                row_start as u32,
            ]);
            if let Some(spec) = &seq.sample {
                let last = seq.query_start + seq.query_len - 1;
                let first = last - seq.drafts;
                let page_table = seq.table_row * self.cap.penalty_pages_per_seq as u32;
                // The first sampled row's input, when it comes from the previous step, is
                // an output token the penalty list lacks; so are the guesses before a row
                // (at most MAX_DRAFTS, as the batch's check holds them: MAX_UNLISTED).
                let from_previous = (batch.prev_tokens)
                    .binary_search_by_key(&first, |p| p.index)
                    .is_ok();
                let unlisted = first + u32::from(!from_previous);
                // A speculative token's row draws the output token after the rows before it.
                for i in 0..=seq.drafts {
                    sample_rows.push(first + i);
                    let mut u = SampleUniform::new(spec, page_table);
                    u.draw_index += i;
                    if spec.params.has_penalties() {
                        u.unlisted = unlisted;
                        u.unlisted_count = first + i + 1 - unlisted;
                    }
                    sampling.push(u);
                }
                lists.push((seq.table_row, &spec.penalties));
            }
        }
        // Scored prompt rows follow the sampled ones.
        for seq in &batch.seqs {
            let Some(score) = &seq.score else { continue };
            for (i, &target) in score.targets.iter().enumerate() {
                sample_rows.push(seq.query_start + score.first_row + i as u32);
                sampling.push(SampleUniform::scored(score, target));
            }
        }
        check("sampler rows", sample_rows.len(), self.cap.rows)?;
        // At most one per sequence: a sequence's pending token is its last.
        check(
            "inputs from the previous step",
            batch.prev_tokens.len(),
            self.cap.seqs,
        )?;
        let prev: Vec<u32> = (batch.prev_tokens.iter())
            .flat_map(|p| [p.index, p.row])
            .collect();

        let counts = StepUniform {
            num_tokens: t as u32,
            num_seqs: batch.seqs.len() as u32,
            num_samples: sample_rows.len() as u32,
            num_prev: batch.prev_tokens.len() as u32,
        };
        // The last check: past it the step is sent, and the rows remember what it wrote.
        let penalty_runs = self.penalties.upload(ctx, &lists)?;
        ctx.write(&self.step, 0, bytemuck::bytes_of(&counts));
        ctx.write(&self.token_ids, 0, bytemuck::cast_slice(&batch.token_ids));
        ctx.write(&self.positions, 0, bytemuck::cast_slice(&batch.positions));
        ctx.write(
            &self.slot_mapping,
            0,
            bytemuck::cast_slice(&batch.slot_mapping),
        );
        ctx.write(&self.token_seq, 0, bytemuck::cast_slice(&token_seq));
        ctx.write(&self.seq_info, 0, bytemuck::cast_slice(&seq_info));
        for (row, len) in new_lens {
            table_lens[row] = len;
        }
        if !runs.is_empty() {
            runs.write(ctx, &self.table_writes);
        }
        ctx.write(&self.sample_rows, 0, bytemuck::cast_slice(&sample_rows));
        ctx.write(&self.sampling, 0, bytemuck::cast_slice(&sampling));
        ctx.write(&self.prev_tokens, 0, bytemuck::cast_slice(&prev));
        let lora = batch.seqs.iter().any(|s| s.lora.is_some());
        if lora {
            let slots: Vec<u32> = (batch.seqs.iter())
                .flat_map(|s| std::iter::repeat_n(s.lora.unwrap_or(u32::MAX), s.query_len as usize))
                .collect();
            ctx.write(&self.lora_slots, 0, bytemuck::cast_slice(&slots));
        }
        Ok(Uploaded {
            counts,
            lora,
            table_runs: runs.len(),
            penalty_runs,
        })
    }
}

/// Words a step's penalty-list writes may take: every list of the pool sent whole (each page
/// a run, each row's pages a run), and on top an entry changed by each token of the step and
/// by each sampled row's token from the previous step (a list sent before changes only by
/// the tokens that became known since).
fn penalty_writes_words(cap: StepCapacity) -> usize {
    let changed = cap.tokens + cap.seqs;
    let runs = cap.penalty_pages + cap.seqs + changed;
    let words = 3 * cap.penalty_pages * kiln_core::PENALTY_PAGE + cap.penalty_pages + 3 * changed;
    1 + 3 * runs + words
}
