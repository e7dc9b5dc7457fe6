//! The sampling launch (`shaders/sample.wgsl`) and the per-row parameters it reads.

use bytemuck::{Pod, Zeroable};
use kiln_core::{LogprobsMode, PromptScore, SampleSpec, SampledToken, SamplingParams, StepBatch};

use crate::{GpuContext, Grid, Kernels, Launch};

/// u32 words per sampled row in the output: id, logprob, then 20 (id, logprob) pairs, then
/// the rank of a scored row's forced token.
pub const SAMPLE_OUT_STRIDE: usize = 43;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    vocab: u32,
    out_stride: u32,
    mask_words: u32,
    /// Word of the penalty store where the pool of entries begins.
    pool_base: u32,
}

/// `mask_row` of a row without a token mask.
pub const NO_MASK: u32 = u32::MAX;
/// The id the sampler writes for a row where no token is allowed (all masked or not finite).
pub const NO_TOKEN: u32 = u32::MAX;

/// Twin of the WGSL `Sampling` struct: one per sampled row.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct SampleUniform {
    pub temperature: f32,
    pub top_k: u32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub top_logprobs: u32,
    pub seed_lo: u32,
    pub seed_hi: u32,
    pub draw_index: u32,
    pub penalty_start: u32,
    pub penalty_count: u32,
    /// Row of the mask buffer, or [`NO_MASK`].
    pub mask_row: u32,
    /// 1: log-probs of the raw logits; 0: of the processed distribution.
    pub raw_logprobs: u32,
    /// [`NO_TOKEN`], or the token a scored prompt row reports.
    pub forced: u32,
    /// Index in the step's input tokens of the first of `unlisted_count` output tokens of
    /// this row that its penalty list lacks (an input taken from the previous step's output;
    /// the guesses before a speculative row), each counted as one more occurrence.
    pub unlisted: u32,
    /// At most [`MAX_UNLISTED`].
    pub unlisted_count: u32,
}

/// Most output tokens a sampled row may count beyond its penalty list (the kernel's
/// `MAX_UNLISTED`): a pending input and the guesses before the row.
pub const MAX_UNLISTED: usize = 1 + kiln_core::MAX_DRAFTS as usize;

impl SampleUniform {
    /// Packs `spec`, whose penalty list's page table starts at word `penalty_start` of the
    /// penalty store, without a token mask.
    pub fn new(spec: &SampleSpec, penalty_start: u32) -> Self {
        let p = &spec.params;
        Self {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            repetition_penalty: p.repetition_penalty,
            presence_penalty: p.presence_penalty,
            frequency_penalty: p.frequency_penalty,
            top_logprobs: p.top_logprobs.min(20),
            seed_lo: spec.seed as u32,
            seed_hi: (spec.seed >> 32) as u32,
            draw_index: spec.draw_index,
            penalty_start,
            penalty_count: spec.penalties.len,
            mask_row: NO_MASK,
            raw_logprobs: u32::from(p.logprobs_mode == LogprobsMode::Raw),
            forced: NO_TOKEN,
            unlisted: 0,
            unlisted_count: 0,
        }
    }

    /// A scored prompt row of `score` whose next token is `target`: the log-probability of
    /// `target` under the raw logits, and at least one alternative (the sampler computes the
    /// forced token's log-probability only along with them).
    pub fn scored(score: &PromptScore, target: u32) -> Self {
        // Temperature 1, nothing filtered, no penalty.
        let plain = SampleSpec {
            params: SamplingParams::default(),
            seed: 0,
            draw_index: 0,
            penalties: Default::default(),
        };
        Self {
            top_logprobs: score.top_logprobs.clamp(1, 20),
            raw_logprobs: 1,
            forced: target,
            ..Self::new(&plain, 0)
        }
    }
}

/// Buffers of the sampling launch besides the step uniform.
pub struct SampleBuffers<'a> {
    /// One [`SampleUniform`] per row.
    pub sampling: &'a wgpu::Buffer,
    /// The penalty lists: page tables, then the pool of `(token, count | seen << 31, bias)`
    /// entries from word `pool_base` (`penalty_store.rs`).
    pub penalties: &'a wgpu::Buffer,
    pub pool_base: u32,
    /// Scratch, one f32 per pool entry: the logits before penalties.
    pub penalty_raw: &'a wgpu::Buffer,
    /// `(rows, ceil(vocab / 32))` allowed-token bitmasks.
    pub masks: &'a wgpu::Buffer,
    /// `(S, vocab)`, modified in place.
    pub logits: &'a wgpu::Buffer,
    /// `(S, SAMPLE_OUT_STRIDE)` words.
    pub out: &'a wgpu::Buffer,
    /// The step's input tokens (read for [`SampleUniform::pending`]).
    pub token_ids: &'a wgpu::Buffer,
}

/// Samples one token per row of `logits` (modified in place).
pub fn sample(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    vocab: usize,
    b: SampleBuffers,
) -> Launch {
    let p = super::params(
        ctx,
        "sample",
        &Params {
            vocab: vocab as u32,
            out_stride: SAMPLE_OUT_STRIDE as u32,
            mask_words: kiln_core::mask_words(vocab) as u32,
            pool_base: b.pool_base,
        },
    );
    Launch::new(
        &ctx.device,
        kernels.get("sample"),
        &[
            step,
            &p,
            b.sampling,
            b.penalties,
            b.logits,
            b.out,
            b.masks,
            b.penalty_raw,
            b.token_ids,
        ],
        Grid::Samples { per: 1, y: 1 },
    )
}

/// What each row of a step's sampler output reports: `(alternatives, scored)`, sampled rows
/// first, then scored prompt rows (which report their forced token's log-probability).
pub fn sampler_rows(batch: &StepBatch) -> Vec<(u32, bool)> {
    let sampled = (batch.seqs.iter()).flat_map(|q| {
        let alternatives = q
            .sample
            .as_ref()
            .map_or(0, |p| p.params.top_logprobs.min(20));
        std::iter::repeat_n((alternatives, false), q.sampled_rows())
    });
    let scored = (batch.seqs.iter().filter_map(|q| q.score.as_ref()))
        .flat_map(|q| std::iter::repeat_n((q.top_logprobs.min(20), true), q.targets.len()));
    sampled.chain(scored).collect()
}

/// Decodes the sampler output (`SAMPLE_OUT_STRIDE` words per row) of the rows `rows` describe.
pub fn decode_sample_out(words: &[u32], rows: &[(u32, bool)]) -> Vec<SampledToken> {
    words
        .chunks(SAMPLE_OUT_STRIDE)
        .zip(rows)
        .map(|(w, &(n, scored))| SampledToken {
            token_id: w[0],
            logprob: ((n > 0 || scored) && w[0] != NO_TOKEN).then(|| f32::from_bits(w[1])),
            top_logprobs: (0..n as usize)
                .map(|i| (w[2 + 2 * i], f32::from_bits(w[3 + 2 * i])))
                .take_while(|&(id, _)| id != NO_TOKEN)
                .collect(),
            rank: scored.then(|| w[SAMPLE_OUT_STRIDE - 1]),
            hidden: None,
        })
        .collect()
}
