//! A fake model runner for deterministic scheduler simulations, with no GPU.
//!
//! [`FakeRunner`] keeps a paged "KV cache" that stores, per slot, the token id and position
//! written there. It performs a step exactly as the real runner must: `swap_out` copies, then
//! `swap_in` copies, then writes every token of the batch into its slot, then, for each sampled
//! sequence, reads the whole context back through the block table (kept between steps from
//! the writes each step sends, as the GPU runner keeps its rows). The sampled token is
//! [`next_token`] of that history, so any scheduler bug that loses, shares or misplaces KV
//! (a wrong block, a stale prefix-cache hit, a missed copy) changes the output or panics.
//! A scored prompt row reads its history the same way and reports [`fake_logprob`].

use std::hash::{DefaultHasher, Hash, Hasher};

use kiln_core::{BLOCK_SIZE, BlockTables, PenaltyLists, PenaltyToken, SampledToken, StepBatch};

use crate::{FinishReason, Request, RequestUpdate, ScheduledStep, Scheduler};

/// Ids returned by [`next_token`] lie in `FIRST_TOKEN..FIRST_TOKEN + VOCAB`.
pub const FIRST_TOKEN: u32 = 100;
pub const VOCAB: u32 = 1000;

/// A fake model: the next token as a pure function of the history (prompt + output so far)
/// and the seed.
pub type FakeModel = fn(&[u32], u64) -> u32;

/// The fake model: a pure function of the full history (prompt + output so far) and seed.
pub fn next_token(history: &[u32], seed: u64) -> u32 {
    let mut h = DefaultHasher::new();
    history.hash(&mut h);
    seed.hash(&mut h);
    FIRST_TOKEN + (h.finish() % VOCAB as u64) as u32
}

/// A fake model that mostly copies: the token that followed the latest earlier occurrence of
/// the last two tokens (else of the last one); one time in eight a token from anywhere in the
/// history, one in eight a fresh [`next_token`] (the history and seed's hash decides). Its
/// output repeats what came before, as a quoting model's does, so guesses from the history
/// (speculative decoding) are often right, not always.
pub fn copying_token(history: &[u32], seed: u64) -> u32 {
    let t = next_token(history, seed);
    let n = history.len();
    let anywhere = history[t as usize % n];
    match t % 8 {
        0 => return t,
        1 => return anywhere,
        _ => {}
    }
    for k in [2, 1] {
        let Some(last) = history.get(n.saturating_sub(k)..).filter(|_| n > k) else {
            continue;
        };
        if let Some(at) = history[..n - 1].windows(k).rposition(|w| w == last) {
            return history[at + k];
        }
    }
    anywhere
}

/// The fake model's log-probability of `target` after `history` (a scored prompt row).
pub fn fake_logprob(history: &[u32], target: u32) -> f32 {
    let mut h = DefaultHasher::new();
    history.hash(&mut h);
    target.hash(&mut h);
    -((h.finish() % 10_000) as f32) / 100.0
}

/// What a request with prompt logprobs reports for its prompt: one entry per prompt token
/// after the first.
pub fn reference_prompt_logprobs(prompt: &[u32]) -> Vec<(u32, f32)> {
    (1..prompt.len())
        .map(|p| (prompt[p], fake_logprob(&prompt[..p], prompt[p])))
        .collect()
}

/// What `req` generates when it runs alone with no limit but its own (no scheduler involved).
pub fn reference_output(req: &Request, max_len: usize) -> (Vec<u32>, FinishReason) {
    reference_output_in_window(req, max_len, None, next_token)
}

/// [`reference_output`] of the fake `model` seeing only the latest `window` tokens.
pub fn reference_output_in_window(
    req: &Request,
    max_len: usize,
    window: Option<usize>,
    model: FakeModel,
) -> (Vec<u32>, FinishReason) {
    let mut history = req.prompt.clone();
    let mut out = Vec::new();
    loop {
        let seen = history.len().saturating_sub(window.unwrap_or(usize::MAX));
        let t = model(&history[seen..], req.seed);
        history.push(t);
        out.push(t);
        if (!req.ignore_eos && req.eos_token_ids.contains(&t)) || req.stop_token_ids.contains(&t) {
            return (out, FinishReason::Stop);
        }
        if out.len() >= req.max_tokens || history.len() >= max_len {
            return (out, FinishReason::Length);
        }
    }
}

type Slot = Option<(u32, u32)>; // (token id, position)

pub struct FakeRunner {
    gpu: Vec<Slot>,
    cpu: Vec<Slot>,
    /// The fake model's sliding window: a token at position `p` reads positions
    /// `p + 1 - window ..= p` (all of them with `None`).
    window: Option<usize>,
    /// The tokens the last step sampled, by sampler row (what a step's
    /// [`StepBatch::prev_tokens`] take).
    last_sampled: Vec<u32>,
    tables: BlockTables,
    penalties: PenaltyLists,
    /// The model it runs ([`next_token`] unless set).
    pub model: FakeModel,
}

impl FakeRunner {
    pub fn new(num_gpu_blocks: usize, num_cpu_blocks: usize, window: Option<usize>) -> Self {
        Self {
            gpu: vec![None; num_gpu_blocks * BLOCK_SIZE],
            cpu: vec![None; num_cpu_blocks * BLOCK_SIZE],
            window,
            last_sampled: Vec::new(),
            tables: BlockTables::default(),
            penalties: PenaltyLists::default(),
            model: next_token,
        }
    }

    /// A GPU block's slots as `(token, position)`, for moving it to another runner.
    pub fn gpu_block(&self, block: u32) -> Vec<Option<(u32, u32)>> {
        let b = block as usize * BLOCK_SIZE;
        self.gpu[b..b + BLOCK_SIZE].to_vec()
    }

    /// Fills a CPU-tier block with slots taken from another runner.
    pub fn fill_cpu_block(&mut self, block: u32, slots: &[Option<(u32, u32)>]) {
        let b = block as usize * BLOCK_SIZE;
        self.cpu[b..b + BLOCK_SIZE].copy_from_slice(slots);
    }

    /// The tokens at positions `first..end` of a sequence, read through its block table;
    /// panics on a slot that does not hold the expected position.
    fn read(&self, table: &[u32], first: usize, end: usize) -> Vec<u32> {
        let bs = BLOCK_SIZE;
        (first..end)
            .map(|p| {
                let slot = table[p / bs] as usize * bs + p % bs;
                match self.gpu.get(slot) {
                    Some(Some((t, pos))) if *pos as usize == p => *t,
                    other => panic!("position {p}: slot {slot} holds {other:?}"),
                }
            })
            .collect()
    }

    /// The first position a token at `pos` reads.
    fn first_read(&self, pos: usize) -> usize {
        (pos + 1).saturating_sub(self.window.unwrap_or(usize::MAX))
    }

    /// Runs one step; panics on an inconsistent batch or on reading a slot that does not hold
    /// the expected position. With a window, every token of the batch reads its window (as
    /// attention does), so a block given back too early is caught even mid-prefill.
    pub fn execute(&mut self, batch: &StepBatch) -> Vec<SampledToken> {
        batch.validate().expect("invalid batch");
        let bs = BLOCK_SIZE;
        // As the GPU runner does: swap-outs are read from the GPU first but land in host
        // memory only after the step, so a swap-in reads the CPU tier as it was before it.
        let saved: Vec<Vec<Slot>> = (batch.swap_out.iter())
            .map(|c| self.gpu_block(c.gpu_block))
            .collect();
        for c in &batch.swap_in {
            let (g, h) = (c.gpu_block as usize * bs, c.cpu_block as usize * bs);
            self.gpu[g..g + bs].copy_from_slice(&self.cpu[h..h + bs]);
        }
        let mut token_ids = batch.token_ids.clone();
        for p in &batch.prev_tokens {
            token_ids[p.index as usize] = self.last_sampled[p.row as usize];
        }
        for ((&slot, &token), &pos) in (batch.slot_mapping.iter())
            .zip(&token_ids)
            .zip(&batch.positions)
        {
            self.gpu[slot as usize] = Some((token, pos));
        }
        for (c, slots) in batch.swap_out.iter().zip(saved) {
            self.fill_cpu_block(c.cpu_block, &slots);
        }
        let tables: Vec<Vec<u32>> = (batch.seqs.iter())
            .map(|s| self.tables.apply(s).to_vec())
            .collect();
        let mut out = Vec::new();
        for (s, table) in batch.seqs.iter().zip(&tables) {
            let end = s.context_len as usize;
            if self.window.is_some() {
                for pos in end - s.query_len as usize..end {
                    self.read(table, self.first_read(pos), pos + 1);
                }
            }
            let Some(spec) = &s.sample else { continue };
            let list = self.penalties.apply(s.table_row, &spec.penalties);
            if spec.params.has_penalties() && self.window.is_none() {
                // The list counts the known history: all of it but an input the sampler
                // takes from the previous step and the guesses, which it counts itself.
                let drafts = s.drafts as usize;
                let first = s.query_start + s.query_len - 1 - s.drafts;
                let pending = batch.prev_tokens.iter().any(|p| p.index == first);
                let history = self.read(table, 0, end - drafts - usize::from(pending));
                let prompt_len = end - drafts - spec.draw_index as usize;
                check_penalty_list(&list, &history, prompt_len);
            }
            // A decode with guesses draws at each of its last rows.
            for row_end in end - s.drafts as usize..=end {
                let history = self.read(table, self.first_read(row_end - 1), row_end);
                out.push(SampledToken {
                    token_id: (self.model)(&history, spec.seed),
                    logprob: None,
                    top_logprobs: Vec::new(),
                    rank: None,
                    hidden: None,
                });
            }
        }
        self.last_sampled = out.iter().map(|t| t.token_id).collect();
        for (s, table) in batch.seqs.iter().zip(&tables) {
            let Some(score) = &s.score else { continue };
            let first_pos = (s.context_len - s.query_len + score.first_row) as usize;
            for (i, &target) in score.targets.iter().enumerate() {
                let end = first_pos + i + 1;
                let history = self.read(table, self.first_read(end - 1), end);
                out.push(SampledToken {
                    token_id: target,
                    logprob: Some(fake_logprob(&history, target)),
                    top_logprobs: Vec::new(),
                    rank: None,
                    hidden: None,
                });
            }
        }
        out
    }
}

/// Checks a penalty list the runner holds against a count of `history` (outputs from
/// `prompt_len` on): each token once, each history token listed with its counts, every other
/// entry a biased token that is not counted.
fn check_penalty_list(list: &[PenaltyToken], history: &[u32], prompt_len: usize) {
    let mut ids: Vec<u32> = list.iter().map(|e| e.token_id).collect();
    ids.sort_unstable();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "a token listed twice");
    for e in list {
        let count = |h: &[u32]| h.iter().filter(|&&t| t == e.token_id).count();
        let outputs = count(history.get(prompt_len..).unwrap_or_default());
        assert_eq!(
            (e.seen, e.output_count as usize),
            (count(history) > 0, outputs),
            "token {} in the penalty list",
            e.token_id
        );
    }
    let listed = |t: &u32| ids.binary_search(t).is_ok();
    assert!(history.iter().all(listed), "a history token is not listed");
}

/// Runs a scheduler against a [`FakeRunner`] one step at a time, recording what happened.
/// With `overlap`, as the engine overlaps steps: each step is scheduled and run while the one
/// before it is committed but not resolved.
pub struct Sim {
    pub overlap: bool,
    /// The committed step and its output, resolved at the next [`Sim::step`] (overlap only).
    in_flight: Option<(ScheduledStep, Vec<SampledToken>)>,
    pub sched: Scheduler,
    pub runner: FakeRunner,
    /// Steps run so far.
    pub steps: usize,
    /// Output tokens of every request, finished or not.
    pub outputs: std::collections::HashMap<u64, Vec<u32>>,
    /// Scored prompt tokens of every request, `(token, logprob)`.
    pub prompt_logprobs: std::collections::HashMap<u64, Vec<(u32, f32)>>,
    pub finished: std::collections::HashMap<u64, (FinishReason, usize)>,
}

impl Sim {
    pub fn new(sched: Scheduler) -> Self {
        let cfg = sched.config();
        let runner = FakeRunner::new(cfg.num_gpu_blocks, cfg.num_cpu_blocks, cfg.sliding_window);
        Self {
            overlap: false,
            in_flight: None,
            sched,
            runner,
            steps: 0,
            outputs: Default::default(),
            prompt_logprobs: Default::default(),
            finished: Default::default(),
        }
    }

    /// Schedules, runs and applies one step, checking the scheduler's invariants after it.
    /// Returns the step and its updates, or `None` when there was nothing to run.
    ///
    /// With `overlap`, the step returned is the one resolved: scheduled and run in an earlier
    /// call (or in this one, when none was in flight), while this call has scheduled and run
    /// the next (unless the scheduler had nothing), which stays committed and unresolved.
    pub fn step(&mut self) -> Option<(ScheduledStep, Vec<RequestUpdate>)> {
        let (step, sampled) = match self.in_flight.take() {
            Some(s) => s,
            None => {
                let mut step = self.sched.schedule()?;
                let sampled = self.runner.execute(&step.batch);
                self.sched.commit(&mut step);
                (step, sampled)
            }
        };
        // As the engine: a step with guesses, or one before a decode that may guess, is not
        // overlapped (the scheduler would only hold that request back).
        let guesses = step.seqs.iter().any(|s| s.drafts > 0);
        let next = if self.overlap && !guesses && !self.sched.speculating() {
            self.sched.check_invariants().expect("scheduler invariants");
            self.sched.schedule().map(|s| {
                let sampled = self.runner.execute(&s.batch);
                (s, sampled)
            })
        } else {
            None
        };
        let updates = self.sched.resolve(step.clone(), &sampled);
        if let Some((mut s, sampled)) = next {
            self.sched.commit(&mut s);
            self.in_flight = Some((s, sampled));
        }
        self.steps += 1;
        for u in &updates {
            if let Some(t) = &u.token {
                self.outputs.entry(u.id).or_default().push(t.token_id);
            }
            let scored = u
                .prompt_logprobs
                .iter()
                .map(|t| (t.token_id, t.logprob.unwrap()));
            self.prompt_logprobs.entry(u.id).or_default().extend(scored);
            if let Some(f) = u.finished {
                self.finished.insert(u.id, (f, u.num_cached_tokens));
            }
        }
        self.sched.check_invariants().expect("scheduler invariants");
        Some((step, updates))
    }

    /// Steps until no request is left; panics after `max_steps`.
    pub fn run_to_completion(&mut self, max_steps: usize) {
        while self.sched.has_unfinished() || self.in_flight.is_some() {
            assert!(
                self.steps < max_steps,
                "not finished after {max_steps} steps"
            );
            self.step()
                .expect("unfinished requests but nothing scheduled");
        }
    }
}
