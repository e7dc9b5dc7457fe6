//! The sampling kernel (`shaders/sample.wgsl`) driven directly, many rows per dispatch:
//! greedy argmax and log-probs (chosen and top-n) against a CPU f64 log-softmax on awkward
//! vocab sizes; seeded determinism; the empirical distribution of seeded draws against the
//! CPU-computed kept set and renormalised probabilities for temperature, top-k, top-p and
//! min-p; repetition / presence / frequency penalties against the CPU formula; token masks,
//! -inf and NaN logits left out of greedy, top-k/top-p and the draw; raw and processed
//! log-probs; scored prompt rows (a forced token) among sampled ones; an output token that
//! the penalty list lacks (an input taken from the previous step, `SampleUniform::pending`).
//!
//! This file holds the harness; `draws.rs` greedy and seeded draws, `penalties.rs` the
//! penalties, `masks.rs` token masks and non-finite logits, `scored.rs` raw log-probs and
//! scored rows.

#[path = "../common/mod.rs"]
mod common;
mod draws;
mod masks;
mod penalties;
mod scored;

use common::*;
use kiln_core::{LogprobsMode, PenaltyToken, PromptScore, SampleSpec, SamplingParams, mask_words};
use kiln_gpu::Kernels;
use kiln_gpu::ops::{self, NO_TOKEN, SAMPLE_OUT_STRIDE, SampleBuffers, SampleUniform};
use rand::Rng;
use rand::seq::SliceRandom;

struct Out {
    id: u32,
    logprob: f32,
    /// All 20 (id, logprob) slots; only the first `top_logprobs` are meaningful.
    top: Vec<(u32, f32)>,
    /// A scored row's rank of its forced token.
    rank: u32,
}

/// One dispatch of the sampler over `rows.len()` rows of `vocab` logits each, with the
/// penalty list packed as the runner packs it (`token, count | seen << 31`).
fn sample(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    vocab: usize,
    rows: &[(Vec<f32>, SampleSpec)],
) -> Vec<Out> {
    let none: Vec<Option<Vec<bool>>> = vec![None; rows.len()];
    sample_masked(ctx, k, vocab, rows, &none)
}

/// [`sample`] with an optional allowed-token list per row, packed as bitmasks.
fn sample_masked(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    vocab: usize,
    rows: &[(Vec<f32>, SampleSpec)],
    allow: &[Option<Vec<bool>>],
) -> Vec<Out> {
    let (mut uniforms, mut penalties, mut masks) = (Vec::new(), Vec::new(), Vec::new());
    for ((l, spec), a) in rows.iter().zip(allow) {
        assert_eq!(l.len(), vocab);
        let mut u = SampleUniform::new(spec, (penalties.len() / 3) as u32);
        if let Some(a) = a {
            u.mask_row = (masks.len() / mask_words(vocab)) as u32;
            let mut words = vec![0u32; mask_words(vocab)];
            a.iter()
                .enumerate()
                .filter(|(_, ok)| **ok)
                .for_each(|(i, _)| words[i / 32] |= 1 << (i % 32));
            masks.extend(words);
        }
        uniforms.push(u);
        penalties.extend(penalty_words(spec));
    }
    let logits: Vec<Vec<f32>> = rows.iter().map(|(l, _)| l.clone()).collect();
    dispatch(ctx, k, vocab, &logits, &uniforms, penalties, masks, &[])
}

/// One dispatch of the sampler over packed rows, with the step's input tokens `inputs` (read
/// by rows with a pending token).
#[allow(clippy::too_many_arguments)]
fn dispatch(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    vocab: usize,
    rows: &[Vec<f32>],
    uniforms: &[SampleUniform],
    mut penalties: Vec<u32>,
    mut masks: Vec<u32>,
    inputs: &[u32],
) -> Vec<Out> {
    let logits: Vec<f32> = rows.concat();
    penalties.extend([0, 0]); // a binding may not be empty
    masks.push(0);
    let token_ids = buf_u32(ctx, &[inputs, &[0]].concat());
    let n = rows.len();
    let step = step_buffer(ctx, n as u32, n as u32, n as u32);
    let sampling = ctx.storage_init("sampling", bytemuck::cast_slice(uniforms));
    let (pb, lb, mb) = (
        buf_u32(ctx, &penalties),
        buf_f32(ctx, &logits),
        buf_u32(ctx, &masks),
    );
    let raw = buf_f32(ctx, &vec![0.0; penalties.len() / 2]);
    let out = ctx.storage("out", (n * SAMPLE_OUT_STRIDE * 4) as u64);
    let b = SampleBuffers {
        sampling: &sampling,
        penalties: &pb,
        penalty_raw: &raw,
        masks: &mb,
        logits: &lb,
        out: &out,
        token_ids: &token_ids,
    };
    let l = ops::sample(ctx, k, &step, vocab, b);
    run_launches(ctx, &[&l], n as u32, n as u32);
    read_u32(ctx, &out, n * SAMPLE_OUT_STRIDE)
        .chunks(SAMPLE_OUT_STRIDE)
        .map(|w| Out {
            id: w[0],
            logprob: f32::from_bits(w[1]),
            top: (0..20)
                .map(|i| (w[2 + 2 * i], f32::from_bits(w[3 + 2 * i])))
                .collect(),
            rank: w[SAMPLE_OUT_STRIDE - 1],
        })
        .collect()
}

fn spec(params: SamplingParams, seed: u64, draw_index: u32) -> SampleSpec {
    SampleSpec {
        params,
        seed,
        draw_index,
        penalty_tokens: vec![],
    }
}

fn log_softmax(l: &[f32], temperature: f32) -> Vec<f64> {
    let t = if temperature > 0.0 {
        temperature as f64
    } else {
        1.0
    };
    let m = l.iter().map(|&v| v as f64 / t).fold(f64::MIN, f64::max);
    let lse = m + l
        .iter()
        .map(|&v| (v as f64 / t - m).exp())
        .sum::<f64>()
        .ln();
    l.iter().map(|&v| v as f64 / t - lse).collect()
}

/// Token ids by value descending, index ascending (the kernel's order).
fn ranked(l: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..l.len()).collect();
    idx.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
    idx
}

/// Checks `n` draws' `counts` per token against the probabilities `want`: a token of
/// probability 0 is never drawn, the others within four standard deviations (plus 0.01).
fn assert_frequencies(name: &str, logits: &[f32], counts: &[usize], want: &[f64], n: f64) {
    for (tok, (&c, &p)) in counts.iter().zip(want).enumerate() {
        let freq = c as f64 / n;
        if p == 0.0 {
            assert_eq!(
                c, 0,
                "{name}: token {tok} (logit {}) is filtered out but was drawn {c} times",
                logits[tok]
            );
        } else {
            let tol = 4.0 * (p * (1.0 - p) / n).sqrt() + 0.01;
            assert!(
                (freq - p).abs() <= tol,
                "{name}: token {tok} (logit {}): frequency {freq:.4}, expected {p:.4} ± {tol:.4}",
                logits[tok]
            );
        }
    }
}

/// The kernel's penalty list words of `spec`: token, output count | seen << 31, bias bits.
fn penalty_words(spec: &SampleSpec) -> Vec<u32> {
    spec.penalty_tokens
        .iter()
        .flat_map(|p| {
            [
                p.token_id,
                p.output_count | (u32::from(p.seen) << 31),
                p.bias.to_bits(),
            ]
        })
        .collect()
}
