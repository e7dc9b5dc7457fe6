//! Building a step: decodes and continuing prefills first, then waiting requests admitted
//! from their longest cached prefix with what is left of the budget, preempting the most
//! recently admitted request when the pool runs out (see the module doc of `scheduler.rs`).
//! Each planned chunk spends tokens and sampler rows, and takes the KV blocks and penalty
//! pages it lacks.

use kiln_core::{BLOCK_SIZE, NO_BLOCK, PrevToken, SeqInBatch, StepBatch};

use super::{Scheduler, blocks_for, window};
use crate::output::{ScheduledSeq, ScheduledStep};
use crate::request::RequestState;

/// Penalty pages a chunk needs: those the list lacks, counted up to the chunk's known
/// tokens, when the chunk is sampled (a list is sent only with a sampled chunk).
fn penalty_pages(st: &mut RequestState, sampled: bool) -> usize {
    if sampled { st.catch_up_penalties() } else { 0 }
}

/// Steps a request may be passed over for want of a LoRA slot before requests through other
/// adapters stop being admitted (about as many tokens as a short reply).
const LORA_PATIENCE: u32 = 64;

/// A request's chunk in the step being built, and what it spends.
#[derive(Clone, Copy)]
pub(super) struct Planned {
    pub id: u64,
    pub tokens: usize,
    pub rows: usize,
}

/// What is left of a step's limits.
#[derive(Clone, Copy)]
pub(super) struct Budget {
    pub tokens: usize,
    pub rows: usize,
}

impl Budget {
    fn spend(&mut self, p: &Planned) {
        self.tokens -= p.tokens;
        self.rows -= p.rows;
    }

    fn refund(&mut self, p: &Planned) {
        self.tokens += p.tokens;
        self.rows += p.rows;
    }
}

impl Scheduler {
    /// Builds the next step, or `None` if there is nothing to run. Must be followed by
    /// [`Self::update`] (or [`Self::commit`]) before the next call.
    pub fn schedule(&mut self) -> Option<ScheduledStep> {
        assert!(!self.scheduled, "schedule() called again before commit()");
        let mut budget = Budget {
            tokens: self.cfg.max_num_batched_tokens,
            rows: self.cfg.max_sampler_rows,
        };
        let mut plan: Vec<Planned> = Vec::new();
        let mut preempted = false;

        // Running requests: decodes first, then continuing prefills, each in admission order.
        let remaining = |s: &Self, id: &u64| {
            let st = &s.requests[id];
            st.tokens.len() - st.num_computed
        };
        let order: Vec<u64> = (self.running.iter().filter(|id| remaining(self, id) == 1))
            .chain(self.running.iter().filter(|id| remaining(self, id) > 1))
            .copied()
            .collect();
        for id in order {
            if budget.tokens == 0 {
                break;
            }
            if !self.running.contains(&id) || self.requests[&id].guessing {
                continue; // preempted earlier in this step, or waiting for its guesses' fate
            }
            let left = remaining(self, &id).min(budget.tokens);
            let st = self.requests.get_mut(&id).unwrap();
            let start = st.num_computed;
            let n = st.chunk_within_rows(start, left, budget.rows);
            let planned = Planned {
                id,
                tokens: n,
                rows: st.sampler_rows(start, n),
            };
            if n == 0 {
                continue; // runs in a later step, when fewer sampler rows share it
            }
            let pages = penalty_pages(st, st.samples_at(start + n));
            let need = blocks_for(start + n) - st.blocks.len();
            loop {
                if self.rows.free_pages() >= pages
                    && let Some(new) = self.kv.allocate(need)
                {
                    let st = self.requests.get_mut(&id).unwrap();
                    st.blocks.extend(new);
                    self.rows.grow_pages(&mut st.table, pages);
                    plan.push(planned);
                    budget.spend(&planned);
                    break;
                }
                let victim = self.preempt_one();
                preempted = true;
                if let Some(pos) = plan.iter().position(|p| p.id == victim) {
                    budget.refund(&plan.remove(pos));
                }
                if victim == id {
                    break;
                }
            }
        }

        // Guesses for the decodes (speculative decoding), then waiting requests.
        self.add_drafts(&mut plan, &mut budget);

        // Waiting requests, in queue order, while budget, seats and blocks last, up to the
        // first held one. A request whose LoRA adapter has no slot to run in (every slot's
        // adapter needed by running requests) is passed over and keeps its place; once one
        // has been passed over for LORA_PATIENCE steps, no request through another adapter is
        // admitted, so that the slots empty as running requests end and it gets one.
        let mut passed = Vec::new();
        let mut starved: Option<u32> = None;
        // The running requests' adapters, kept as requests are admitted.
        let mut needed = match self.cfg.lora_slots {
            0 => Vec::new(),
            _ => self.adapters_of(self.running.iter()),
        };
        while !preempted && budget.tokens > 0 && self.running.len() < self.max_num_seqs {
            let Some(&id) = self.waiting.front() else {
                break;
            };
            if self.requests[&id].held {
                break;
            }
            let lora = self.requests[&id].req.lora.map(|l| l.id);
            let held_back = starved.is_some_and(|s| lora.is_some_and(|l| l != s));
            if held_back || !self.lora_fits(id, &needed) {
                let st = self.requests.get_mut(&id).unwrap();
                if !held_back {
                    st.lora_passed += 1;
                    if st.lora_passed > LORA_PATIENCE {
                        starved = starved.or(lora);
                    }
                }
                passed.extend(self.waiting.pop_front());
                continue;
            }
            match self.admit(id, budget) {
                Some(planned) => {
                    self.waiting.pop_front();
                    self.running.push(id);
                    self.place_lora(id, &mut needed);
                    plan.push(planned);
                    budget.spend(&planned);
                }
                None => break,
            }
        }
        for id in passed.into_iter().rev() {
            self.waiting.push_front(id);
        }

        let step = self.build_step(&plan);
        self.stats.step_prefill_tokens = step
            .seqs
            .iter()
            .filter(|s| !s.is_decode)
            .map(|s| s.num_tokens)
            .sum();
        self.stats.step_decode_tokens = step
            .seqs
            .iter()
            .filter(|s| s.is_decode)
            .map(|s| s.num_tokens)
            .sum();
        self.stats.total_prefill_tokens += self.stats.step_prefill_tokens as u64;
        self.stats.total_decode_tokens += self.stats.step_decode_tokens as u64;
        let b = &step.batch;
        if step.seqs.is_empty() && b.swap_in.is_empty() && b.swap_out.is_empty() {
            return None;
        }
        self.scheduled = true;
        Some(step)
    }

    /// Takes the longest cached prefix and the blocks (and penalty pages) for a first chunk
    /// within `budget`; returns the chunk, or `None` (nothing changed) if the pool, the
    /// penalty pool or the sampler rows are short.
    fn admit(&mut self, id: u64, budget: Budget) -> Option<Planned> {
        let caching = self.cfg.enable_prefix_caching;
        let st = self.requests.get_mut(&id).unwrap();
        debug_assert!(st.num_computed == 0 && st.blocks.is_empty() && st.pending_row.is_none());
        let hits = if caching {
            st.update_keys();
            let max_blocks = st.max_hit_blocks();
            self.kv
                .lookup(&st.keys, &st.tokens, st.salt.as_deref(), max_blocks)
        } else {
            Vec::new()
        };
        let hit_tokens = hits.len() * BLOCK_SIZE;
        let n = (st.tokens.len() - hit_tokens).min(budget.tokens);
        let n = st.chunk_within_rows(hit_tokens, n, budget.rows);
        let new_blocks = blocks_for(hit_tokens + n) - hits.len();
        let planned = Planned {
            id,
            tokens: n,
            rows: st.sampler_rows(hit_tokens, n),
        };
        let pages = if n == 0 {
            0
        } else {
            penalty_pages(st, st.samples_at(hit_tokens + n))
        };
        // Hits behind the window of the first token to compute are not taken at all.
        let behind = window::blocks_behind(self.cfg.sliding_window, hit_tokens).min(hits.len());
        let taken = &hits[behind..];
        if n == 0
            || pages > self.rows.free_pages()
            || self.kv.free_blocks_for_hits(taken) + new_blocks > self.kv.num_free()
        {
            return None;
        }
        let mut blocks = vec![NO_BLOCK; behind];
        blocks.extend(self.kv.acquire_hits(taken));
        blocks.extend(self.kv.allocate(new_blocks).expect("checked free blocks"));
        self.rows.grow_pages(&mut st.table, pages);
        st.blocks = blocks;
        st.num_released = behind;
        st.num_computed = hit_tokens;
        st.chain = hits.iter().map(|h| h.id).collect();
        if st.num_cached_tokens.is_none() {
            st.num_cached_tokens = Some(hit_tokens.min(st.prompt_len()));
        }
        if caching {
            self.stats.prefix_cache_queries += st.tokens.len() as u64;
            self.stats.prefix_cache_hits += hit_tokens as u64;
        }
        Some(planned)
    }

    /// Preempts the running request of lowest priority that arrived last (with equal
    /// priorities the most recently admitted); returns its id.
    fn preempt_one(&mut self) -> u64 {
        let at = (0..self.running.len())
            .max_by_key(|&i| self.queue_key(self.running[i]))
            .expect("a request needs blocks, so one is running");
        let victim = self.running.remove(at);
        let st = self.requests.get_mut(&victim).unwrap();
        self.rows.release(&mut st.table);
        self.kv.release(&st.blocks);
        st.blocks.clear();
        st.num_released = 0;
        st.num_computed = 0;
        st.chain.clear();
        st.chain_broken = false;
        self.enqueue(victim);
        self.stats.num_preemptions += 1;
        victim
    }

    fn build_step(&mut self, plan: &[Planned]) -> ScheduledStep {
        let mut batch = StepBatch::default();
        let mut seqs = Vec::with_capacity(plan.len());
        // Sampled sequences are the sampler's first rows, in batch order.
        let mut sampler_row = 0;
        for &Planned { id, tokens: n, .. } in plan {
            let st = self.requests.get_mut(&id).unwrap();
            self.rows.assign(&mut st.table);
            let table = st.table.write(&st.blocks);
            let start = st.num_computed;
            let query_start = batch.token_ids.len() as u32;
            let drafts = std::mem::take(&mut st.drafts);
            for p in start..start + n {
                match st.pending_row.filter(|_| p + 1 == st.tokens.len()) {
                    Some(row) => {
                        let index = batch.token_ids.len() as u32;
                        batch.prev_tokens.push(PrevToken { index, row });
                        batch.token_ids.push(0);
                    }
                    None if p >= st.tokens.len() => {
                        batch.token_ids.push(drafts[p - st.tokens.len()]);
                    }
                    None => batch.token_ids.push(st.tokens[p]),
                }
                batch.positions.push(p as u32);
                batch
                    .slot_mapping
                    .push(st.blocks[p / BLOCK_SIZE] * BLOCK_SIZE as u32 + (p % BLOCK_SIZE) as u32);
            }
            // Past the guesses, the tokens the request has.
            let known = n - drafts.len();
            let sampled = st.samples_at(start + known);
            if sampled {
                if st.req.return_hidden && st.num_output() == 0 {
                    batch.hidden_rows.push(sampler_row);
                }
                sampler_row += 1 + drafts.len() as u32;
            }
            let score = st.prompt_score(start, known);
            let scored = score.as_ref().map_or(0, |s| s.targets.len());
            debug_assert_eq!(st.blocks.len(), blocks_for(start + n));
            batch.seqs.push(SeqInBatch {
                query_start,
                query_len: n as u32,
                context_len: (start + n) as u32,
                table_row: table.row,
                table_from: table.from,
                table_tail: table.tail,
                sample: sampled.then(|| st.sample_spec()),
                drafts: drafts.len() as u32,
                score,
                lora: st.req.lora.map(|l| {
                    let slot = (self.lora.slot_of(l.id))
                        .expect("a running request's adapter holds a slot");
                    self.lora.hold(slot, l.id);
                    slot
                }),
            });
            let is_decode = known == 1 && sampled && st.num_output() > 0;
            seqs.push(ScheduledSeq {
                id,
                num_computed_before: start,
                num_tokens: n,
                sampled,
                is_decode,
                scored,
                drafts: drafts.len(),
            });
        }
        (batch.swap_in, batch.swap_out) = self.kv.take_copies();
        debug_assert_eq!(batch.validate(), Ok(()));
        ScheduledStep {
            batch,
            seqs,
            lora_loads: std::mem::take(&mut self.lora_loads),
            committed: false,
        }
    }
}
