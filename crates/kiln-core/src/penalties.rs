//! Penalty lists kept on the runner: each sampled sequence with penalties or a logit bias has
//! a list of the tokens whose logits the sampler changes, held in pages of a pool beside its
//! block-table row ([`crate::SeqInBatch::table_row`]), and a step sends only what changed
//! ([`PenaltyWrites`]): the pages the list grew into, its new entries and the entries whose
//! counts moved. [`PenaltyLists`] is a host copy kept the same way.

/// Entries in one page of the runner's penalty pool.
pub const PENALTY_PAGE: usize = 128;

/// A token whose logit the sampler changes before anything else: one of the sequence's
/// history that the penalties look at, or one the request biases (`logit_bias`), or both.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PenaltyToken {
    pub token_id: u32,
    /// Times the token appears in the generated output (presence/frequency penalties).
    pub output_count: u32,
    /// Whether it appears anywhere in prompt or output (repetition penalty).
    pub seen: bool,
    /// Added to the logit after the penalties (the request's `logit_bias`; 0 for none).
    pub bias: f32,
}

/// A step's changes to one sequence's penalty list (each token at most once in the list, in
/// any order). The list's entry `i` lives in slot `i % PENALTY_PAGE` of its page
/// `i / PENALTY_PAGE`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PenaltyWrites {
    /// Entries the list holds after this step.
    pub len: u32,
    /// Index of the first of the list's pages that `pages` replaces (0 for a list sent
    /// afresh: a row just given to the sequence).
    pub pages_from: u32,
    /// Pool pages of the list from page `pages_from` on; the list holds
    /// `pages_from + pages.len()` pages after this step.
    pub pages: Vec<u32>,
    /// Entries written this step, by index in the list: new ones and ones whose counts
    /// changed. Every entry a list holds was written by this step or an earlier one.
    pub entries: Vec<(u32, PenaltyToken)>,
}

impl PenaltyWrites {
    /// Writes that fill a fresh list with `list`, in pool pages `first_page..` (for tests and
    /// for callers that send whole lists).
    pub fn whole(list: &[PenaltyToken], first_page: u32) -> Self {
        let pages = list.len().div_ceil(PENALTY_PAGE) as u32;
        Self {
            len: list.len() as u32,
            pages_from: 0,
            pages: (first_page..first_page + pages).collect(),
            entries: (0u32..).zip(list.iter().copied()).collect(),
        }
    }

    /// Pages the list holds after this step.
    pub fn num_pages(&self) -> usize {
        self.pages_from as usize + self.pages.len()
    }

    /// Checks what a batch alone can: the list fits its pages and every write lies in it.
    pub fn validate(&self) -> Result<(), String> {
        if self.len as usize > self.num_pages() * PENALTY_PAGE {
            return Err(format!(
                "a penalty list of {} entries in {} pages",
                self.len,
                self.num_pages()
            ));
        }
        match self.entries.iter().find(|(i, _)| *i >= self.len) {
            Some((i, _)) => Err(format!(
                "penalty entry {i} written past the list's {} entries",
                self.len
            )),
            None => Ok(()),
        }
    }
}

/// A host copy of the runner's penalty lists, one per block-table row, kept by applying each
/// step's writes (for fakes and tests that read the lists on the CPU).
#[derive(Clone, Debug, Default)]
pub struct PenaltyLists {
    rows: Vec<(Vec<u32>, Vec<Option<PenaltyToken>>)>,
}

impl PenaltyLists {
    /// Applies `writes` to row `row`'s list and returns the list. Panics where the writes
    /// leave a gap in the pages or an entry never written (a scheduler bug).
    pub fn apply(&mut self, row: u32, writes: &PenaltyWrites) -> Vec<PenaltyToken> {
        let r = row as usize;
        if self.rows.len() <= r {
            self.rows.resize_with(r + 1, Default::default);
        }
        let (pages, entries) = &mut self.rows[r];
        let from = writes.pages_from as usize;
        assert!(
            from <= pages.len(),
            "row {r}: penalty pages written from {from} of {}",
            pages.len()
        );
        writes.validate().unwrap();
        if from == 0 {
            entries.clear();
        }
        pages.truncate(from);
        pages.extend_from_slice(&writes.pages);
        entries.resize(writes.len as usize, None);
        for &(i, e) in &writes.entries {
            entries[i as usize] = Some(e);
        }
        (entries.iter().enumerate())
            .map(|(i, e)| e.unwrap_or_else(|| panic!("row {r}: penalty entry {i} never written")))
            .collect()
    }
}
