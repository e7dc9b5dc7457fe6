//! The sampling kernel (`shaders/sample.wgsl`) driven directly, many rows per dispatch:
//! greedy argmax and log-probs (chosen and top-n) against a CPU f64 log-softmax on awkward
//! vocab sizes; seeded determinism; the empirical distribution of seeded draws against the
//! CPU-computed kept set and renormalised probabilities for temperature, top-k, top-p and
//! min-p; repetition / presence / frequency penalties against the CPU formula; token masks,
//! -inf and NaN logits left out of greedy, top-k/top-p and the draw; raw and processed
//! log-probs; scored prompt rows (a forced token) among sampled ones; output tokens that
//! the penalty list lacks (an input taken from the previous step, the guesses before a
//! speculative row: `SampleUniform::unlisted`).
//!
//! This file holds the harness; `draws.rs` greedy and seeded draws, `penalties.rs` the
//! penalties, `pages.rs` penalty lists spanning pages of the pool, `masks.rs` token masks
//! and non-finite logits, `scored.rs` raw log-probs and scored rows, `unlisted.rs` output
//! tokens the list lacks.

#[path = "../common/mod.rs"]
mod common;
mod draws;
mod masks;
mod pages;
mod penalties;
mod scored;
mod unlisted;

use common::*;
use kiln_core::{
    LogprobsMode, PENALTY_PAGE, PenaltyToken, PenaltyWrites, PromptScore, SampleSpec,
    SamplingParams, mask_words,
};
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
/// penalty lists laid out as the runner keeps them ([`penalty_store`]).
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
    let (mut uniforms, mut masks) = (Vec::new(), Vec::new());
    let specs: Vec<&SampleSpec> = rows.iter().map(|(_, s)| s).collect();
    let (store, pool_base, tables) = penalty_store(&specs);
    for (((l, spec), a), table) in rows.iter().zip(allow).zip(tables) {
        assert_eq!(l.len(), vocab);
        let mut u = SampleUniform::new(spec, table);
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
    }
    let logits: Vec<Vec<f32>> = rows.iter().map(|(l, _)| l.clone()).collect();
    let penalties = (store, pool_base);
    dispatch(ctx, k, vocab, &logits, &uniforms, penalties, masks, &[])
}

/// One dispatch of the sampler over packed rows, with the step's input tokens `inputs` (read
/// by rows with output tokens their lists lack).
#[allow(clippy::too_many_arguments)]
fn dispatch(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    vocab: usize,
    rows: &[Vec<f32>],
    uniforms: &[SampleUniform],
    (mut penalties, pool_base): (Vec<u32>, u32),
    mut masks: Vec<u32>,
    inputs: &[u32],
) -> Vec<Out> {
    let logits: Vec<f32> = rows.concat();
    let pool_entries = (penalties.len() - pool_base as usize) / 3;
    penalties.push(0); // a binding may not be empty
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
    let raw = buf_f32(ctx, &vec![0.0; pool_entries + 1]);
    let out = ctx.storage("out", (n * SAMPLE_OUT_STRIDE * 4) as u64);
    let b = SampleBuffers {
        sampling: &sampling,
        penalties: &pb,
        pool_base,
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
        penalties: Default::default(),
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

/// The penalty list that `spec`'s writes fill (they write a whole list).
fn penalty_list(spec: &SampleSpec) -> Vec<PenaltyToken> {
    let w = &spec.penalties;
    let mut list = vec![None; w.len as usize];
    for &(i, e) in &w.entries {
        list[i as usize] = Some(e);
    }
    list.into_iter().map(|e| e.expect("a whole list")).collect()
}

/// The penalty store as the runner keeps it: a page table per row, then the pool, in which
/// the rows' pages are dealt in turn from the pool's end, so that no list is contiguous and
/// each page lookup matters. Returns the store's words, where its pool begins, and where
/// each row's page table begins.
fn penalty_store(specs: &[&SampleSpec]) -> (Vec<u32>, u32, Vec<u32>) {
    let lists: Vec<Vec<PenaltyToken>> = specs.iter().map(|s| penalty_list(s)).collect();
    let pages: Vec<usize> = (lists.iter())
        .map(|l| l.len().div_ceil(PENALTY_PAGE))
        .collect();
    let per_row = pages.iter().copied().max().unwrap_or(0).max(1);
    let total: usize = pages.iter().sum();
    let mut tables = vec![vec![0u32; per_row]; lists.len()];
    let mut next = total as u32;
    for p in 0..per_row {
        for (table, &n) in tables.iter_mut().zip(&pages) {
            if p < n {
                next -= 1;
                table[p] = next;
            }
        }
    }
    let pool_base = (lists.len() * per_row) as u32;
    let mut store: Vec<u32> = tables.concat();
    store.resize(pool_base as usize + 3 * total * PENALTY_PAGE, 0);
    for (list, table) in lists.iter().zip(&tables) {
        for (i, e) in list.iter().enumerate() {
            let entry = table[i / PENALTY_PAGE] as usize * PENALTY_PAGE + i % PENALTY_PAGE;
            let w = pool_base as usize + 3 * entry;
            store[w..w + 3].copy_from_slice(&[
                e.token_id,
                e.output_count | (u32::from(e.seen) << 31),
                e.bias.to_bits(),
            ]);
        }
    }
    let starts = (0..lists.len()).map(|r| (r * per_row) as u32).collect();
    (store, pool_base, starts)
}

/// A spec whose penalty list is `list`.
fn with_list(params: SamplingParams, seed: u64, list: Vec<PenaltyToken>) -> SampleSpec {
    SampleSpec {
        penalties: PenaltyWrites::whole(&list, 0),
        ..spec(params, seed, 0)
    }
}
