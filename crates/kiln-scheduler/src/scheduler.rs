//! The scheduler: continuous batching with chunked prefill over a paged, prefix-cached KV pool.
//!
//! Each step, [`Scheduler::schedule`] spends a token budget: first on running requests (those
//! one token from the end, i.e. decodes, then continuing prefills, each in admission order),
//! then on waiting requests, in order of priority (lower first, vLLM's convention) and then of
//! arrival, which start from their longest cached prefix. A request that needs a block when
//! the pool is empty preempts the running request of lowest priority that arrived last
//! (possibly itself; with equal priorities, the most recently admitted): its blocks are freed
//! (full ones stay cached) and it goes back to its place in the waiting queue (the front, with
//! equal priorities), to be recomputed from prompt + output. No request is admitted in a step
//! that preempted, and admission stops at a request held while its blocks come in from disk
//! ([`Scheduler::hold`]: those behind it keep their places). [`Scheduler::update`] applies the runner's
//! sampled tokens, caches newly computed full blocks and retires finished requests, whose
//! blocks return to the pool at once.
//!
//! Capacities are admission rules: besides the token budget, the sequence limit and the pool,
//! a step carries at most `max_sampler_rows` sampled sequences and scored prompt rows
//! together, and the penalty lists of running requests (kept on the runner, in pages of a
//! pool of `max_penalty_entries` entries) are a resource like KV blocks: a request that needs
//! pages when none are free preempts as one that needs blocks does. A request through a LoRA
//! adapter runs only while the adapter holds one of the runner's adapter slots
//! (`lora_slots.rs`); one whose adapter finds no slot free is passed over, keeping its place,
//! and the requests behind it go ahead (until it has been passed over for long: then those
//! through other adapters wait too). A request that could never fit is refused by
//! [`Scheduler::add_request`]. A step the runner could not run is undone by
//! [`Scheduler::fail_step`] (in `scheduler/failure.rs`). With a sliding window on every layer,
//! a request gives back the blocks behind its window as it advances (`scheduler/window.rs`).
//!
//! Invariants (see [`Scheduler::check_invariants`]): a running request holds exactly the
//! blocks covering its context this step; a waiting request holds none; every GPU block's
//! reference count equals the number of requests holding it (plus one for a pin);
//! a finishing request (ended by its length in a committed step) is in no queue; a running
//! request's LoRA adapter holds a slot. At most two
//! steps are in flight: one committed and unresolved, and the next one scheduled.
//!
//! Files: `scheduler/step.rs` builds a step (admission, preemption), `overlap.rs` applies its
//! results in two halves so the next step can be scheduled while it runs, `failure.rs` undoes one
//! the runner could not run, `window.rs` gives blocks back behind a sliding window,
//! `transfer.rs` pins and imports blocks for a prefill/decode split and the disk tier (and
//! holds requests while they come), `score.rs` picks the prompt rows a step scores (prompt
//! logprobs), `draft.rs` gives decodes guesses of their next tokens and keeps those confirmed
//! (speculative decoding).
//!
//! Cost of a step: O(running + admitted) requests plus O(tokens scheduled + blocks allocated);
//! a prefix lookup is O(hit blocks * BLOCK_SIZE); preemption and finishing are O(blocks held +
//! running).

use std::collections::{HashMap, VecDeque};

use kiln_core::{BLOCK_SIZE, NO_BLOCK, PENALTY_PAGE, SampledToken};

use crate::config::{SchedulerConfig, SchedulerError};
use crate::kv_cache::KvCache;
use crate::kv_events::{KvEvent, Medium};
use crate::lora_slots::{LoraLoad, LoraSlots};
use crate::output::{FinishReason, RequestUpdate, ScheduledStep};
use crate::request::{Request, RequestState};
use crate::stats::SchedulerStats;
use crate::table_rows::TableRows;

mod draft;
mod failure;
mod overlap;
mod score;
mod step;
mod transfer;
mod window;

pub use transfer::{BlockPlace, CachedBlock, PinnedBlocks, WaitingHead, prefix_keys};

pub(crate) fn blocks_for(tokens: usize) -> usize {
    tokens.div_ceil(BLOCK_SIZE)
}

pub struct Scheduler {
    cfg: SchedulerConfig,
    /// Longest sequence: `max_model_len`, or what the whole pool can hold if less (unless a
    /// sliding window on every layer bounds what a request holds).
    max_len: usize,
    max_num_seqs: usize,
    kv: KvCache,
    requests: HashMap<u64, RequestState>,
    /// Running requests in admission order.
    running: Vec<u64>,
    /// Waiting requests by [`Self::queue_key`].
    waiting: VecDeque<u64>,
    /// Requests added so far (each one's arrival number).
    arrivals: u64,
    /// The runner's block-table rows, one per running request.
    rows: TableRows,
    /// A step is scheduled and not yet committed (or failed).
    scheduled: bool,
    /// A step is committed and its tokens not yet resolved (or it failed).
    unresolved: bool,
    stats: SchedulerStats,
    /// Finished requests' blocks held for a decode server (`scheduler/transfer.rs`).
    pinned: HashMap<u64, PinnedBlocks>,
    /// The adapter each of the runner's LoRA slots holds, and the loads of the step being
    /// built.
    lora: LoraSlots,
    lora_loads: Vec<LoraLoad>,
}

impl Scheduler {
    pub fn new(cfg: SchedulerConfig) -> Self {
        assert!(
            cfg.num_gpu_blocks > 0,
            "the GPU pool needs at least one block"
        );
        assert!(
            cfg.max_num_batched_tokens > 0,
            "the step budget must be positive"
        );
        assert!(
            cfg.max_sampler_rows > 0,
            "the sampler needs at least one row"
        );
        let max_len = cfg.max_len();
        let max_num_seqs = cfg.max_num_seqs.clamp(1, cfg.num_gpu_blocks);
        let kv = KvCache::new(cfg.num_gpu_blocks, cfg.num_cpu_blocks);
        let rows = TableRows::new(max_num_seqs, cfg.max_penalty_entries / PENALTY_PAGE);
        let lora = LoraSlots::new(cfg.lora_slots, cfg.lora_resident, cfg.lora_loads);
        Self {
            cfg,
            max_len,
            max_num_seqs,
            kv,
            requests: HashMap::new(),
            running: Vec::new(),
            waiting: VecDeque::new(),
            arrivals: 0,
            rows,
            scheduled: false,
            unresolved: false,
            stats: SchedulerStats::default(),
            pinned: HashMap::new(),
            lora,
            lora_loads: Vec::new(),
        }
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// Longest sequence (prompt + output) a request may reach.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Queues a request: after every waiting one of its priority or higher.
    pub fn add_request(&mut self, r: Request) -> Result<(), SchedulerError> {
        let id = r.id;
        if r.prompt.is_empty() {
            return Err(SchedulerError::EmptyPrompt { id });
        }
        if r.prompt.len() >= self.max_len {
            return Err(SchedulerError::PromptTooLong {
                id,
                len: r.prompt.len(),
                limit: self.max_len,
            });
        }
        if r.max_tokens == 0 && r.prompt_logprobs.is_none() {
            return Err(SchedulerError::ZeroMaxTokens { id });
        }
        if let Some(n) = r.prompt_logprobs.filter(|&n| n > 20) {
            return Err(SchedulerError::InvalidSampling {
                id,
                why: format!("prompt_logprobs must be at most 20, not {n}"),
            });
        }
        r.sampling
            .validate()
            .map_err(|why| SchedulerError::InvalidSampling { id, why })?;
        if let Some(&(t, b)) = r.logit_bias.iter().find(|(_, b)| !b.is_finite()) {
            return Err(SchedulerError::InvalidSampling {
                id,
                why: format!("the bias of token {t} is not finite ({b})"),
            });
        }
        let mut ids: Vec<u32> = r.logit_bias.iter().map(|&(t, _)| t).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(SchedulerError::InvalidSampling {
                id,
                why: format!("token {} is biased twice", w[0]),
            });
        }
        if r.min_tokens > r.max_tokens {
            return Err(SchedulerError::InvalidSampling {
                id,
                why: format!(
                    "min_tokens ({}) must be at most max_tokens ({})",
                    r.min_tokens, r.max_tokens
                ),
            });
        }
        let banned = r.min_tokens_ban().len();
        if r.sampling.has_penalties() || !r.logit_bias.is_empty() || banned > 0 {
            let history = if r.sampling.has_penalties() {
                (r.prompt.len() + r.max_tokens).min(self.max_len)
            } else {
                0
            };
            // A list of `needed` entries takes that many pages' worth of the pool.
            let needed = history + r.logit_bias.len() + banned;
            let limit = self.cfg.max_penalty_entries / PENALTY_PAGE * PENALTY_PAGE;
            if needed > limit {
                return Err(SchedulerError::TooManyPenaltyEntries { id, needed, limit });
            }
        }
        if self.requests.contains_key(&id) {
            return Err(SchedulerError::DuplicateId { id });
        }
        if let Some(l) = r.lora
            && self.lora.find(l.id, |_| false).is_none()
        {
            return Err(SchedulerError::NoLoraSlot { id, adapter: l.id });
        }
        let mut st = RequestState::new(r);
        st.arrival = self.arrivals;
        self.arrivals += 1;
        self.requests.insert(id, st);
        self.enqueue(id);
        Ok(())
    }

    /// Where a request stands in the waiting queue (and, highest, which running request is
    /// preempted first): its priority, then its arrival.
    fn queue_key(&self, id: u64) -> (i32, u64) {
        let st = &self.requests[&id];
        (st.req.priority, st.arrival)
    }

    /// Puts a waiting request in its place in the queue. O(waiting).
    fn enqueue(&mut self, id: u64) {
        let key = self.queue_key(id);
        let at = self.waiting.partition_point(|&w| self.queue_key(w) <= key);
        self.waiting.insert(at, id);
    }

    /// Removes a running or waiting request and frees its blocks. O(running + waiting).
    /// Returns its final update, or `None` if the id is unknown (e.g. already finished).
    pub fn abort(&mut self, id: u64) -> Option<RequestUpdate> {
        let mut st = self.requests.remove(&id)?;
        self.running.retain(|&x| x != id);
        self.waiting.retain(|&x| x != id);
        self.rows.release(&mut st.table);
        self.kv.release(&st.blocks);
        Some(RequestUpdate {
            id,
            token: None,
            prompt_logprobs: Vec::new(),
            finished: Some(FinishReason::Abort),
            ended_by_token: false,
            num_cached_tokens: st.num_cached_tokens.unwrap_or(0),
        })
    }

    pub fn has_unfinished(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Unfinished requests through LoRA adapter `id`.
    pub fn requests_through(&self, id: u32) -> usize {
        (self.requests.values())
            .filter(|r| r.req.lora.is_some_and(|l| l.id == id))
            .count()
    }

    /// The LoRA adapters running requests run through and those waiting requests need, each
    /// once, by id. O(running + waiting).
    pub fn lora_requests(&self) -> (Vec<u32>, Vec<u32>) {
        (
            self.adapters_of(self.running.iter()),
            self.adapters_of(self.waiting.iter()),
        )
    }

    /// Adapter `id` is gone (unloaded): its slot, if it held one, is free. Refused (`false`)
    /// while a request runs or waits through it.
    pub fn unload_lora(&mut self, id: u32) -> bool {
        if self.requests_through(id) > 0 {
            return false;
        }
        self.lora.forget(id);
        true
    }

    /// The adapters the requests of `queue` run through, each once, in order of id.
    /// O(queue).
    pub(super) fn adapters_of<'a>(&self, queue: impl Iterator<Item = &'a u64>) -> Vec<u32> {
        let mut ids: Vec<u32> = queue
            .filter_map(|r| self.requests[r].req.lora.map(|l| l.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Whether waiting request `id`'s adapter (if any) holds a slot or can be loaded into one
    /// now, `needed` being the running requests' adapters ([`Self::adapters_of`]).
    fn lora_fits(&self, id: u64, needed: &[u32]) -> bool {
        match self.requests[&id].req.lora {
            Some(l) => (self.lora.find(l.id, |a| needed.binary_search(&a).is_ok())).is_some(),
            None => true,
        }
    }

    /// Puts admitted request `id`'s adapter (if any) into its slot, loading it there if it
    /// is not in one ([`Self::lora_fits`] said it can be), and adds it to `needed`.
    fn place_lora(&mut self, id: u64, needed: &mut Vec<u32>) {
        let Some(l) = self.requests[&id].req.lora else {
            return;
        };
        let (slot, load) = (self.lora.find(l.id, |a| needed.binary_search(&a).is_ok()))
            .expect("a request is admitted only when its adapter fits");
        if load {
            self.lora_loads.push(LoraLoad { slot, id: l.id });
            self.stats.lora_loads += 1;
        }
        self.lora.hold(slot, l.id);
        if let Err(at) = needed.binary_search(&l.id) {
            needed.insert(at, l.id);
        }
    }

    pub fn stats(&self) -> SchedulerStats {
        SchedulerStats {
            num_running: self.running.len(),
            num_waiting: self.waiting.len(),
            kv_blocks_used: self.kv.num_blocks() - self.kv.num_free(),
            kv_blocks_free: self.kv.num_free(),
            kv_blocks_cached: self.kv.num_cached(),
            cpu_blocks_stored: self.kv.cpu_stored_total,
            cpu_blocks_restored: self.kv.cpu_restored_total,
            cpu_blocks_resident: self.kv.num_cpu_stored(),
            kv_blocks_pinned: self.num_pinned_blocks(),
            penalty_pages_used: self.rows.used_pages(),
            ..self.stats
        }
    }

    /// Empties the prefix cache of every block no request holds (vLLM's
    /// `reset_prefix_cache`), on the GPU and in the CPU tier; blocks running requests or pins
    /// hold stay cached. Returns the GPU and CPU blocks dropped. Not between
    /// [`Self::schedule`] and [`Self::commit`].
    pub fn reset_prefix_cache(&mut self) -> (usize, usize) {
        assert!(
            !self.scheduled,
            "reset_prefix_cache() while a step is being scheduled"
        );
        self.kv.reset()
    }

    /// Starts recording KV-cache events (see [`KvEvent`]); the first is `AllBlocksCleared`.
    pub fn enable_kv_events(&mut self) {
        self.kv.events.enable();
    }

    /// The KV-cache events since the last call (empty unless enabled).
    pub fn take_kv_events(&mut self) -> Vec<KvEvent> {
        self.kv.events.take()
    }

    /// Every block in the prefix cache: `(key, parent key, tokens, medium)`, for checking
    /// the event stream against the cache itself.
    pub fn cached_blocks(&self) -> Vec<(u64, Option<u64>, [u32; BLOCK_SIZE], Medium)> {
        self.kv.cached_blocks()
    }

    /// A request's block table now (empty while it waits; `NO_BLOCK` for blocks given back
    /// behind a sliding window).
    pub fn blocks_of(&self, id: u64) -> Option<&[u32]> {
        self.requests.get(&id).map(|s| &s.blocks[..])
    }

    /// Tokens of a request already in the KV cache.
    pub fn num_computed(&self, id: u64) -> Option<usize> {
        self.requests.get(&id).map(|s| s.num_computed)
    }

    /// Whether a running request's next decode may carry guesses of its next tokens
    /// (speculative decoding): then the next step is best scheduled once this one's tokens
    /// are known, since a guess follows the last of them. O(running).
    pub fn speculating(&self) -> bool {
        self.cfg.speculation.is_some()
            && (self.running.iter()).any(|id| self.requests[id].may_guess())
    }

    /// Ids of running requests, in admission order.
    pub fn running_ids(&self) -> &[u64] {
        &self.running
    }

    /// Applies a step's results: [`Self::commit`] then [`Self::resolve`]. `sampled` holds
    /// one token per sampled sequence, in order, then one per scored prompt row, in order.
    /// Returns one update per request that is still known (aborts in between are skipped) and
    /// sampled, scored or finished.
    pub fn update(
        &mut self,
        mut step: ScheduledStep,
        sampled: &[SampledToken],
    ) -> Vec<RequestUpdate> {
        self.commit(&mut step);
        self.resolve(step, sampled)
    }

    fn finish(&mut self, id: u64) {
        let mut st = self.requests.remove(&id).unwrap();
        self.running.retain(|&x| x != id);
        self.waiting.retain(|&x| x != id);
        self.rows.release(&mut st.table);
        self.release_or_pin(id, st);
    }

    /// Checks every invariant of the scheduler, the pool, the prefix cache and the CPU tier.
    /// O(blocks + requests). Meant for tests and debug builds.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut refs = vec![0u32; self.kv.num_blocks()];
        for (id, st) in &self.requests {
            let running = self.running.contains(id);
            let queues = usize::from(running) + usize::from(self.waiting.contains(id));
            if queues != usize::from(st.finishing.is_none()) {
                return Err(format!(
                    "request {id} is in {queues} queues (finishing: {:?})",
                    st.finishing
                ));
            }
            if st.held && !self.waiting.contains(id) {
                return Err(format!("request {id} is held but not waiting"));
            }
            if running {
                if st.blocks.len() < blocks_for(st.num_computed) {
                    return Err(format!(
                        "request {id}: {} blocks for {} tokens",
                        st.blocks.len(),
                        st.num_computed
                    ));
                }
                window::check(*id, st, self.cfg.sliding_window)?;
                if let Some(l) = st.req.lora.filter(|l| self.lora.slot_of(l.id).is_none()) {
                    return Err(format!(
                        "running request {id}'s adapter {} holds no slot",
                        l.id
                    ));
                }
            } else if st.finishing.is_none()
                && (!st.blocks.is_empty() || st.num_computed != 0 || st.num_released != 0)
            {
                return Err(format!("waiting request {id} holds blocks"));
            }
            for &b in st.blocks.iter().filter(|&&b| b != NO_BLOCK) {
                refs[b as usize] += 1;
            }
        }
        let keys: Vec<_> = self.waiting.iter().map(|&w| self.queue_key(w)).collect();
        if keys.windows(2).any(|k| k[0] > k[1]) {
            return Err(format!("the waiting queue is out of order: {keys:?}"));
        }
        let finishing = self.requests.values().filter(|s| s.finishing.is_some());
        if self.running.len() + self.waiting.len() + finishing.count() != self.requests.len() {
            return Err("queues and request table disagree".into());
        }
        self.count_pins(&mut refs);
        for (id, st) in &self.requests {
            if st.table.row().is_some() != self.running.contains(id) {
                return Err(format!(
                    "request {id}: holds a block-table row unless running"
                ));
            }
            if st.table.num_pages() > 0 && !self.running.contains(id) {
                return Err(format!(
                    "request {id}: holds penalty pages but is not running"
                ));
            }
        }
        (self.rows.check(self.requests.values().map(|st| &st.table)))?;
        self.kv.check(&refs)
    }
}
