//! The runner's block-table rows: each running request holds one, and a step sends only the
//! entries of its table that the row does not hold yet ([`kiln_core::SeqInBatch::table_row`]).
//!
//! A request's [`TableSync`] remembers what it last sent, so no call site that changes a
//! table (new blocks, blocks given back behind a window, a fresh table after a preemption)
//! has to report it: the step sends the table from its first entry that differs. A row given
//! back is wiped on both sides of the contract by forgetting what was sent.
//!
//! Cost: O(table) compared per running request per step, O(changed entries) sent.

/// Rows free for running requests, `0..max_num_seqs` (the runner's rows).
#[derive(Debug)]
pub(crate) struct TableRows {
    free: Vec<u32>,
    total: usize,
}

/// One request's row and the table as that row holds it on the runner.
#[derive(Debug, Default)]
pub(crate) struct TableSync {
    row: Option<u32>,
    sent: Vec<u32>,
}

/// A step's writes to one row: entries `from..` become `tail`.
pub(crate) struct TableWrite {
    pub row: u32,
    pub from: u32,
    pub tail: Vec<u32>,
}

impl TableRows {
    pub fn new(rows: usize) -> Self {
        Self {
            free: (0..rows as u32).rev().collect(),
            total: rows,
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

    /// Takes `sync`'s row back, if it holds one.
    pub fn release(&mut self, sync: &mut TableSync) {
        if let Some(row) = sync.row.take() {
            self.free.push(row);
        }
        sync.sent.clear();
    }

    /// Checks that the rows held (`held`, each request's) and the free ones are each row once.
    pub fn check(&self, held: impl Iterator<Item = Option<u32>>) -> Result<(), String> {
        let mut seen = vec![false; self.total];
        for row in held.flatten().chain(self.free.iter().copied()) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_sent_whole_then_by_difference() {
        let mut rows = TableRows::new(2);
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
        rows.check([a.row()].into_iter()).unwrap();
    }

    #[test]
    fn a_row_given_back_is_sent_whole_to_its_next_holder() {
        let mut rows = TableRows::new(1);
        let (mut a, mut b) = (TableSync::default(), TableSync::default());
        rows.assign(&mut a);
        a.write(&[1, 2]);
        rows.release(&mut a);
        rows.assign(&mut b);
        let w = b.write(&[1, 2]);
        assert_eq!((w.row, w.from, w.tail), (0, 0, vec![1, 2]));
        assert!(rows.check([a.row(), b.row(), b.row()].into_iter()).is_err());
        rows.check([a.row(), b.row()].into_iter()).unwrap();
    }
}
