//! The penalty lists the runner keeps between steps ([`kiln_core::PenaltyWrites`]): one
//! buffer holding a page table per block-table row, then a pool of pages of entries. A step's
//! changes go up as one list of runs that a launch applies (`table_writes.wgsl`, the kernel
//! that writes block tables), so a decoding sequence costs a few words a step, not its list.
//!
//! Layout, in u32 words: row `r`'s page table at `r * pages_per_seq`; entry `e` of page `p`
//! at `pool_base + 3 * (p * PENALTY_PAGE + e)` as (token, output count | seen << 31, bias
//! bits). The sampler finds entry `i` of a row's list in page `table[i / PENALTY_PAGE]`.

use std::borrow::Cow;
use std::sync::Mutex;

use kiln_core::{PENALTY_PAGE, PenaltyWrites};

use crate::ops::Runs;
use crate::{GpuContext, GpuError};

pub struct PenaltyStore {
    /// Page tables, then the pool.
    pub store: wgpu::Buffer,
    /// The step's runs into `store`.
    pub writes: wgpu::Buffer,
    /// Scratch for the sampler, one f32 per pool entry: its logit before penalties.
    pub raw: wgpu::Buffer,
    pub pages: usize,
    pub pages_per_seq: usize,
    /// Word of `store` where the pool begins (past every row's page table).
    pub pool_base: u32,
    writes_words: usize,
    /// Each row's pages and entries, as the store holds them.
    rows: Mutex<Vec<(Vec<u32>, u32)>>,
}

impl PenaltyStore {
    /// A store for `seqs` rows and a pool of `pages` pages, whose step writes may hold
    /// `writes_words` words.
    pub fn new(
        ctx: &GpuContext,
        seqs: usize,
        pages: usize,
        pages_per_seq: usize,
        writes_words: usize,
    ) -> Self {
        let entries = pages * PENALTY_PAGE;
        Self {
            store: ctx.storage(
                "penalty_store",
                ((seqs * pages_per_seq + 3 * entries) * 4).max(4) as u64,
            ),
            writes: ctx.storage("penalty_writes", writes_words as u64 * 4),
            raw: ctx.storage("penalty_raw", (entries * 4).max(4) as u64),
            pages,
            pages_per_seq,
            pool_base: (seqs * pages_per_seq) as u32,
            writes_words,
            rows: Mutex::new(vec![(Vec::new(), 0); seqs]),
        }
    }

    /// Checks every sampled sequence's writes (`(row, writes)`) against what its row holds
    /// and queues them as one list of runs; returns the number of runs (which the writes
    /// launch applies). Nothing is changed when a write is refused.
    pub fn upload(
        &self,
        ctx: &GpuContext,
        lists: &[(u32, &PenaltyWrites)],
    ) -> Result<usize, GpuError> {
        let mut rows = self.rows.lock().unwrap();
        let pool_base = self.pool_base;
        let mut runs = Runs::default();
        runs.reserve(
            lists
                .iter()
                .map(|(_, w)| 3 * w.entries.len() + w.pages.len())
                .sum(),
        );
        let mut new_rows = Vec::with_capacity(lists.len());
        for &(row, w) in lists {
            let (held, held_len) = &rows[row as usize];
            let from = w.pages_from as usize;
            // A list sent afresh (from page 0) is written whole; one that grows, from its end.
            let old_len = if from == 0 { 0 } else { *held_len };
            let new_entries = w.entries.iter().filter(|(i, _)| *i >= old_len).count();
            if (new_entries as u32) < w.len.saturating_sub(old_len) {
                return Err(GpuError::Batch(format!(
                    "row {row}: penalty entries {old_len}..{} are not all written",
                    w.len
                )));
            }
            if from > held.len() {
                return Err(GpuError::Batch(format!(
                    "row {row}: penalty pages written from {from}, but the row holds {}",
                    held.len()
                )));
            }
            if w.num_pages() > self.pages_per_seq {
                return Err(GpuError::Capacity {
                    what: "penalty pages of one sequence",
                    needed: w.num_pages(),
                    max: self.pages_per_seq,
                });
            }
            if let Some(p) = w.pages.iter().find(|&&p| p as usize >= self.pages) {
                return Err(GpuError::Batch(format!(
                    "row {row}: penalty page {p} is past the pool's {}",
                    self.pages
                )));
            }
            // Most steps keep the row's pages: copied only when they change.
            let pages: Cow<[u32]> = if from == held.len() && w.pages.is_empty() {
                Cow::Borrowed(held)
            } else {
                Cow::Owned([&held[..from], &w.pages[..]].concat())
            };
            if !w.pages.is_empty() {
                let first = row * self.pages_per_seq as u32 + w.pages_from;
                runs.push(first, w.pages.iter().copied());
            }
            // Entries of consecutive indices within a page go up as one run.
            let mut rest = &w.entries[..];
            while let Some(&(i, _)) = rest.first() {
                let (page, slot) = (i as usize / PENALTY_PAGE, i as usize % PENALTY_PAGE);
                let n = (rest.iter().zip(i..))
                    .take(PENALTY_PAGE - slot)
                    .take_while(|((j, _), k)| j == k)
                    .count();
                let entry = pages[page] as usize * PENALTY_PAGE + slot;
                let words = rest[..n].iter().flat_map(|(_, e)| {
                    let packed = e.output_count.min(0x7fff_ffff) | (u32::from(e.seen) << 31);
                    [e.token_id, packed, e.bias.to_bits()]
                });
                runs.push(pool_base + 3 * entry as u32, words);
                rest = &rest[n..];
            }
            let pages = match pages {
                Cow::Owned(p) => Some(p),
                Cow::Borrowed(_) => None,
            };
            new_rows.push((row, pages, w.len));
        }
        if runs.encoded_len() > self.writes_words {
            return Err(GpuError::Capacity {
                what: "penalty-list words written in one step",
                needed: runs.encoded_len(),
                max: self.writes_words,
            });
        }
        for (row, pages, len) in new_rows {
            let r = &mut rows[row as usize];
            if let Some(p) = pages {
                r.0 = p;
            }
            r.1 = len;
        }
        if !runs.is_empty() {
            runs.write(ctx, &self.writes);
        }
        Ok(runs.len())
    }
}
