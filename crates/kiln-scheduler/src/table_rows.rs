//! The runner's rows: each running request holds one, with its block table and, when it has
//! penalties or a logit bias, its penalty list in pages of the runner's penalty pool; a step
//! sends only what the row does not hold yet ([`kiln_core::SeqInBatch::table_row`],
//! [`kiln_core::PenaltyWrites`]).
//!
//! A request's [`TableSync`] remembers what it last sent, so no call site that changes a
//! table (new blocks, blocks given back behind a window, a fresh table after a preemption)
//! has to report it: the step sends the table from its first entry that differs. A row given
//! back is wiped on both sides of the contract by forgetting what was sent, and its penalty
//! pages go back to the pool.
//!
//! Cost: O(table) compared per running request per step, O(changed entries) sent.

use kiln_core::{PENALTY_PAGE, PenaltyWrites};

use crate::penalty_list::PenaltyList;

/// Rows free for running requests, `0..max_num_seqs` (the runner's rows), and pages free in
/// the runner's penalty pool.
#[derive(Debug)]
pub(crate) struct TableRows {
    free: Vec<u32>,
    total: usize,
    pages: PagePool,
}

/// Pages of the penalty pool: those given back, then `next..total`, never handed out.
#[derive(Debug)]
struct PagePool {
    free: Vec<u32>,
    next: usize,
    total: usize,
}

/// One request's row and the table as that row holds it on the runner, with the pages of its
/// penalty list and how much of the list they hold.
#[derive(Debug, Default)]
pub(crate) struct TableSync {
    row: Option<u32>,
    sent: Vec<u32>,
    pages: Vec<u32>,
    pages_sent: usize,
    entries_sent: usize,
}

/// A step's writes to one row: entries `from..` become `tail`.
pub(crate) struct TableWrite {
    pub row: u32,
    pub from: u32,
    pub tail: Vec<u32>,
}

impl TableRows {
    /// `rows` rows and a penalty pool of `pages` pages.
    pub fn new(rows: usize, pages: usize) -> Self {
        Self {
            free: (0..rows as u32).rev().collect(),
            total: rows,
            pages: PagePool {
                free: Vec::new(),
                next: 0,
                total: pages,
            },
        }
    }

    /// Penalty pages held by requests.
    pub fn used_pages(&self) -> usize {
        self.pages.next - self.pages.free.len()
    }

    /// Penalty pages free.
    pub fn free_pages(&self) -> usize {
        self.pages.free.len() + (self.pages.total - self.pages.next)
    }

    /// Gives `sync` `n` more penalty pages. Panics when fewer are free (checked by the caller).
    pub fn grow_pages(&mut self, sync: &mut TableSync, n: usize) {
        assert!(n <= self.free_pages(), "{n} penalty pages wanted");
        for _ in 0..n {
            let page = self.pages.free.pop().unwrap_or_else(|| {
                self.pages.next += 1;
                (self.pages.next - 1) as u32
            });
            sync.pages.push(page);
        }
    }

    /// Gives `sync` a row unless it holds one. Panics when none is free: the scheduler runs
    /// at most as many requests as there are rows.
    pub fn assign(&mut self, sync: &mut TableSync) {
        if sync.row.is_none() {
            sync.row = Some(
                self.free
                    .pop()
                    .expect("a block-table row per running request"),
            );
            sync.sent.clear();
        }
    }

    /// Takes `sync`'s row and penalty pages back.
    pub fn release(&mut self, sync: &mut TableSync) {
        if let Some(row) = sync.row.take() {
            self.free.push(row);
        }
        sync.sent.clear();
        self.pages.free.append(&mut sync.pages);
        sync.pages_sent = 0;
        sync.entries_sent = 0;
    }

    /// Checks that the rows held (`held`, each request's) and the free ones are each row once,
    /// and the same of the penalty pages handed out.
    pub fn check<'a>(&self, held: impl Iterator<Item = &'a TableSync>) -> Result<(), String> {
        let mut seen = vec![false; self.total];
        let mut pages = vec![false; self.pages.next];
        let mut rows = Vec::new();
        let mut held_pages = Vec::new();
        for sync in held {
            rows.extend(sync.row);
            held_pages.extend_from_slice(&sync.pages);
        }
        for p in held_pages
            .into_iter()
            .chain(self.pages.free.iter().copied())
        {
            match pages.get_mut(p as usize) {
                Some(s) if !*s => *s = true,
                _ => return Err(format!("penalty page {p} is held twice or out of range")),
            }
        }
        if let Some(p) = pages.iter().position(|s| !s) {
            return Err(format!("penalty page {p} is neither free nor held"));
        }
        for row in rows.into_iter().chain(self.free.iter().copied()) {
            match seen.get_mut(row as usize) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(format!(
                        "block-table row {row} is held twice or out of range"
                    ));
                }
            }
        }
        match seen.iter().position(|s| !s) {
            Some(row) => Err(format!("block-table row {row} is neither free nor held")),
            None => Ok(()),
        }
    }
}

impl TableSync {
    pub fn row(&self) -> Option<u32> {
        self.row
    }

    /// What the step must write so that the row holds `blocks`, which it then holds.
    /// Panics without a row.
    pub fn write(&mut self, blocks: &[u32]) -> TableWrite {
        let row = self.row.expect("a running request holds a block-table row");
        let n = self.sent.len();
        // Most steps: the table grew or stayed (one comparison of memory).
        let from = if blocks.len() >= n && self.sent[..] == blocks[..n] {
            n
        } else {
            (self.sent.iter().zip(blocks))
                .position(|(a, b)| a != b)
                .unwrap_or(n.min(blocks.len()))
        };
        self.sent.truncate(from);
        self.sent.extend_from_slice(&blocks[from..]);
        TableWrite {
            row,
            from: from as u32,
            tail: blocks[from..].to_vec(),
        }
    }

    /// Penalty pages held.
    pub fn num_pages(&self) -> usize {
        self.pages.len()
    }

    /// Penalty pages this row lacks for a list of `entries` entries.
    pub fn pages_needed(&self, entries: usize) -> usize {
        entries
            .div_ceil(PENALTY_PAGE)
            .saturating_sub(self.pages.len())
    }

    /// What the step must write so that the row's penalty list is `list`, which it then holds.
    /// Panics if the row lacks pages for it ([`TableRows::grow_pages`] first).
    pub fn penalty_writes(&mut self, list: &mut PenaltyList) -> PenaltyWrites {
        let len = list.entries().len();
        assert!(
            self.pages_needed(len) == 0,
            "penalty pages for {len} entries"
        );
        let sent = self.entries_sent;
        let mut entries: Vec<(u32, _)> = (list.take_changed().into_iter())
            .filter(|&i| (i as usize) < sent)
            .map(|i| (i, list.entries()[i as usize]))
            .collect();
        entries.extend((sent..len).map(|i| (i as u32, list.entries()[i])));
        let writes = PenaltyWrites {
            len: len as u32,
            pages_from: self.pages_sent as u32,
            pages: self.pages[self.pages_sent..].to_vec(),
            entries,
        };
        self.pages_sent = self.pages.len();
        self.entries_sent = len;
        writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_sent_whole_then_by_difference() {
        let mut rows = TableRows::new(2, 0);
        let mut a = TableSync::default();
        rows.assign(&mut a);
        let w = a.write(&[5, 6]);
        assert_eq!((w.row, w.from, w.tail), (0, 0, vec![5, 6]));
        let w = a.write(&[5, 6]);
        assert_eq!((w.from, w.tail), (2, vec![]));
        let w = a.write(&[5, 6, 9]);
        assert_eq!((w.from, w.tail), (2, vec![9]));
        // An entry changed in the middle (a block given back behind a window).
        let w = a.write(&[u32::MAX, 6, 9]);
        assert_eq!((w.from, w.tail), (0, vec![u32::MAX, 6, 9]));
        // A shorter table (after a preemption) is rewritten from where it differs.
        let w = a.write(&[u32::MAX, 7]);
        assert_eq!((w.from, w.tail), (1, vec![7]));
        rows.check([&a].into_iter()).unwrap();
    }

    #[test]
    fn a_row_given_back_is_sent_whole_to_its_next_holder() {
        let mut rows = TableRows::new(1, 0);
        let (mut a, mut b) = (TableSync::default(), TableSync::default());
        rows.assign(&mut a);
        a.write(&[1, 2]);
        rows.release(&mut a);
        rows.assign(&mut b);
        let w = b.write(&[1, 2]);
        assert_eq!((w.row, w.from, w.tail), (0, 0, vec![1, 2]));
        assert!(rows.check([&a, &b, &b].into_iter()).is_err());
        rows.check([&a, &b].into_iter()).unwrap();
    }
}
