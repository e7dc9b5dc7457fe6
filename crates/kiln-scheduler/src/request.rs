//! A request as submitted, and its state inside the scheduler.
//!
//! A request has no phase: it has `tokens` (prompt + output so far) and `num_computed` (how
//! many of them are in the KV cache). Each step it is given `n <= tokens.len() - num_computed`
//! tokens; it is sampled only when that reaches the end of `tokens`.
//!
//! Invariants: `blocks.len() * BLOCK_SIZE >= num_computed`; the first `num_released` entries
//! of `blocks` are `NO_BLOCK` (given back behind a sliding window), no other is; `keys` hold the chained prefix-cache
//! keys of the first `keys.len()` full blocks of `tokens`; `chain` holds the verified entry ids
//! of the first `chain.len() <= keys.len()` blocks (the ids used as parents when registering).

use std::sync::Arc;

use kiln_core::{BLOCK_SIZE, PenaltyWrites, SampleSpec, SamplingParams, TokenFilter};

use crate::output::FinishReason;
use crate::penalty_list::PenaltyList;
use crate::prefix_hash::block_key;
use crate::table_rows::TableSync;

/// What `tokens` holds where the token is not known yet (never sent to a runner: the step
/// takes it from the previous step's output, [`kiln_core::PrevToken`]).
const PLACEHOLDER: u32 = u32::MAX;

/// A generation request, already tokenized.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: u64,
    pub prompt: Vec<u32>,
    pub sampling: SamplingParams,
    pub seed: u64,
    /// Most tokens to generate (at least 1).
    pub max_tokens: usize,
    /// Fewest tokens to generate: until then end-of-sequence and stop tokens are not
    /// sampled (vLLM's `min_tokens`; at most `max_tokens`).
    pub min_tokens: usize,
    pub stop_token_ids: Vec<u32>,
    pub ignore_eos: bool,
    pub eos_token_ids: Vec<u32>,
    /// Isolates prefix-cache sharing: requests share cached blocks only with equal salts.
    pub cache_salt: Option<String>,
    /// Prefill/decode split, producer side: when the request finishes, its full computed
    /// blocks stay held (pinned) for a decode server to fetch, until
    /// [`crate::Scheduler::unpin`].
    pub pin_blocks: bool,
    /// Score the prompt: report each prompt token's log-probability after the first, with
    /// this many most likely alternatives (at most 20), in [`crate::RequestUpdate`]s. With
    /// it `max_tokens` may be 0 (score only).
    pub prompt_logprobs: Option<u32>,
    /// Added to these tokens' logits before sampling (OpenAI's `logit_bias`), distinct ids.
    pub logit_bias: Vec<(u32, f32)>,
    /// Lower is served first (vLLM's `priority`): the waiting queue is ordered by it, and the
    /// running request preempted first is the one with the highest value. 0 by default.
    pub priority: i32,
    /// Tokens never sampled (vLLM's `allowed_token_ids` and `bad_words`): the engine masks
    /// them each step; the scheduler does not read it.
    pub filter: TokenFilter,
    /// The final hidden state at the prompt's last token comes back with the first token
    /// ([`kiln_core::SampledToken::hidden`]): an embedding of the prompt.
    pub return_hidden: bool,
    /// Whether a decode may carry guesses of the next tokens when the scheduler speculates
    /// (`speculation.rs`; never with penalties, a logit bias or `min_tokens`' ban). The
    /// engine clears it for a request whose tokens a grammar or token filter constrains.
    pub speculative: bool,
    /// The LoRA adapter the request runs through; the engine folds the adapter into
    /// `cache_salt`, so no cached block is shared across adapters.
    pub lora: Option<LoraRef>,
}

/// A LoRA adapter a request runs through: the engine's id for it (its place among the
/// adapters the engine holds; which runner slot it occupies is the scheduler's choice), and
/// the adapter's fingerprint, which the engine checks when the request is added (the id may
/// have been given to another adapter since it was looked up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoraRef {
    pub id: u32,
    pub fingerprint: u64,
}

impl Request {
    /// A greedy request with no stop tokens, for tests and examples.
    pub fn new(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Self {
        Self {
            id,
            prompt,
            sampling: SamplingParams::greedy(),
            seed: 0,
            max_tokens,
            min_tokens: 0,
            stop_token_ids: Vec::new(),
            ignore_eos: false,
            eos_token_ids: Vec::new(),
            cache_salt: None,
            pin_blocks: false,
            prompt_logprobs: None,
            logit_bias: Vec::new(),
            priority: 0,
            filter: TokenFilter::default(),
            return_hidden: false,
            speculative: true,
            lora: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct RequestState {
    pub req: Request,
    pub salt: Option<Arc<str>>,
    pub tokens: Vec<u32>,
    pub num_computed: usize,
    pub blocks: Vec<u32>,
    /// Leading entries of `blocks` given back behind a sliding window (now `NO_BLOCK`).
    pub num_released: usize,
    pub keys: Vec<u64>,
    pub chain: Vec<u64>,
    /// A hash collision stopped this request's blocks from being cached.
    pub chain_broken: bool,
    /// Set at first admission.
    pub num_cached_tokens: Option<usize>,
    /// Prompt rows scored so far (prompt logprobs; `scheduler/score.rs`).
    pub num_scored: usize,
    /// Set while the last of `tokens` is a placeholder for the token that the committed,
    /// unresolved step samples in this sampler row (`scheduler/overlap.rs`).
    pub pending_row: Option<u32>,
    /// Guesses of the tokens after the last, planned for the step being built.
    pub drafts: Vec<u32>,
    /// Set while the committed, unresolved step carries guesses of this request's next
    /// tokens: how far it gets is known only with the step's tokens, so no step is
    /// scheduled for it until then.
    pub guessing: bool,
    /// Set while the request waits for blocks on their way into the cache (read from disk):
    /// neither it nor those behind it are admitted until they are in
    /// ([`crate::Scheduler::hold`]).
    pub held: bool,
    /// Set when the committed step ends the request by its length: it runs no more and holds
    /// no blocks, and its final update waits for the step's tokens.
    pub finishing: Option<FinishReason>,
    /// The runner's block-table row while running, and what it holds.
    pub table: TableSync,
    /// The request's arrival number (set by the scheduler when it is added).
    pub arrival: u64,
    /// Steps in which the request was passed over because its LoRA adapter found no slot.
    pub lora_passed: u32,
    /// Distinct history and biased tokens, with penalties or a logit bias.
    penalties: Option<PenaltyList>,
    output_len: usize,
}

impl Request {
    /// The tokens `min_tokens` keeps from being sampled until then: end-of-sequence (unless
    /// ignored) and stop tokens, distinct. None without `min_tokens`.
    pub fn min_tokens_ban(&self) -> Vec<u32> {
        if self.min_tokens == 0 {
            return Vec::new();
        }
        let eos = self.eos_token_ids.iter().filter(|_| !self.ignore_eos);
        let mut ids: Vec<u32> = eos.chain(&self.stop_token_ids).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

impl RequestState {
    pub fn new(mut req: Request) -> Self {
        let tokens = std::mem::take(&mut req.prompt);
        let salt = req.cache_salt.as_deref().map(Arc::from);
        let banned = req.min_tokens_ban();
        let penalties =
            (req.sampling.has_penalties() || !req.logit_bias.is_empty() || !banned.is_empty())
                .then(|| {
                    let mut list = PenaltyList::new(&req.logit_bias);
                    list.ban(&banned);
                    list
                });
        Self {
            req,
            salt,
            tokens,
            num_computed: 0,
            blocks: Vec::new(),
            num_released: 0,
            keys: Vec::new(),
            chain: Vec::new(),
            chain_broken: false,
            num_cached_tokens: None,
            num_scored: 0,
            pending_row: None,
            drafts: Vec::new(),
            guessing: false,
            held: false,
            finishing: None,
            table: TableSync::default(),
            arrival: 0,
            lora_passed: 0,
            penalties,
            output_len: 0,
        }
    }

    pub fn prompt_len(&self) -> usize {
        self.tokens.len() - self.num_output()
    }

    pub fn num_output(&self) -> usize {
        self.output_len
    }

    /// Tokens whose ids are known (all but a pending placeholder).
    pub fn known_len(&self) -> usize {
        self.tokens.len() - usize::from(self.pending_row.is_some())
    }

    /// Extends `keys` to cover every full block of known tokens. O(new blocks * BLOCK_SIZE).
    pub fn update_keys(&mut self) {
        while (self.keys.len() + 1) * BLOCK_SIZE <= self.known_len() {
            let i = self.keys.len();
            let parent = i.checked_sub(1).map(|p| self.keys[p]);
            let t = &self.tokens[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
            self.keys.push(block_key(parent, t, self.salt.as_deref()));
        }
    }

    /// Counts the known history into the penalty list; returns the penalty pages the row
    /// lacks for the list (0 without one). O(new tokens).
    pub fn catch_up_penalties(&mut self) -> usize {
        let known = self.known_len();
        let prompt_len = self.prompt_len();
        let Some(list) = &mut self.penalties else {
            return 0;
        };
        if self.req.sampling.has_penalties() {
            // A pending output token is not known yet: the sampler counts it itself.
            list.catch_up(&self.tokens[..known], prompt_len);
        }
        self.table.pages_needed(list.entries().len())
    }

    /// What to sample for the next output token, with the changes to the penalty list since
    /// it was last sent. The row must hold pages for the list (see
    /// [`Self::catch_up_penalties`]). O(new tokens).
    pub fn sample_spec(&mut self) -> SampleSpec {
        let lacking = self.catch_up_penalties();
        debug_assert_eq!(lacking, 0, "request {}: penalty pages", self.req.id);
        let penalties = match &mut self.penalties {
            Some(list) => {
                if list.is_banning() && self.output_len >= self.req.min_tokens {
                    list.lift_ban();
                }
                self.table.penalty_writes(list)
            }
            None => PenaltyWrites::default(),
        };
        SampleSpec {
            params: self.req.sampling,
            seed: self.req.seed,
            draw_index: self.num_output() as u32,
            penalties,
        }
    }

    /// Appends a placeholder for the token that sampler row `row` of the step just committed
    /// draws; says whether the request ends by its length with it.
    pub fn append_pending(&mut self, row: u32, max_len: usize) -> Option<FinishReason> {
        self.tokens.push(PLACEHOLDER);
        self.output_len += 1;
        self.pending_row = Some(row);
        (self.output_len >= self.req.max_tokens || self.tokens.len() >= max_len)
            .then_some(FinishReason::Length)
    }

    /// Puts the sampled token in its placeholder; says whether it is a stop token (EOS unless
    /// ignored, or a stop token id).
    pub fn resolve_pending(&mut self, token: u32) -> bool {
        assert!(
            self.pending_row.take().is_some(),
            "request {}: a token with no placeholder",
            self.req.id
        );
        *self.tokens.last_mut().unwrap() = token;
        self.is_stop(token)
    }

    /// Appends a token drawn at a guess's row, the guess (the token before it) having been
    /// confirmed: that guess is now computed. Says whether the request ends with it.
    pub fn append_confirmed(&mut self, token: u32, max_len: usize) -> Option<FinishReason> {
        self.tokens.push(token);
        self.num_computed += 1;
        self.output_len += 1;
        if self.is_stop(token) {
            Some(FinishReason::Stop)
        } else {
            (self.output_len >= self.req.max_tokens || self.tokens.len() >= max_len)
                .then_some(FinishReason::Length)
        }
    }

    /// Whether `token` ends the request: EOS unless ignored, or a stop token id.
    fn is_stop(&self, token: u32) -> bool {
        let r = &self.req;
        (!r.ignore_eos && r.eos_token_ids.contains(&token)) || r.stop_token_ids.contains(&token)
    }

    /// Whether this request's decodes may carry guesses: not when a grammar or token filter
    /// constrains it (`Request::speculative`), nor when it holds a penalty list (penalties,
    /// a logit bias or `min_tokens`' ban) and reports raw log-probabilities, since the rows
    /// of one decode would share the list's per-entry scratch for raw logits on the runner.
    /// (Each row's penalties count the guesses before it.)
    pub fn may_guess(&self) -> bool {
        self.req.speculative
            && !(self.penalties.is_some() && self.req.sampling.reports_raw_logprobs())
    }

    /// Most guesses a decode of this request may carry now (0: none): when it may guess and
    /// its last token is known, a guess being one output token it may still produce. While
    /// `min_tokens` bans the end tokens, only as many as keep every row under the ban (the
    /// list, and so the ban, is the same for all rows of a decode).
    pub fn draft_limit(&self, max_len: usize) -> usize {
        if !self.may_guess() || self.pending_row.is_some() {
            return 0;
        }
        let banned = (self.penalties.as_ref()).is_some_and(|list| list.is_banning());
        let under_ban = if banned {
            self.req.min_tokens.saturating_sub(self.output_len + 1)
        } else {
            usize::MAX
        };
        (self.req.max_tokens.saturating_sub(self.output_len + 1))
            .min(max_len.saturating_sub(self.tokens.len() + 1))
            .min(under_ban)
    }
}
