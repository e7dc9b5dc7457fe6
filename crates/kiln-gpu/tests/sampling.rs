//! The sampling kernel (`shaders/sample.wgsl`) driven directly, many rows per dispatch:
//! greedy argmax and log-probs (chosen and top-n) against a CPU f64 log-softmax on awkward
//! vocab sizes; seeded determinism; the empirical distribution of seeded draws against the
//! CPU-computed kept set and renormalised probabilities for temperature, top-k, top-p and
//! min-p; repetition / presence / frequency penalties against the CPU formula; token masks,
//! -inf and NaN logits left out of greedy, top-k/top-p and the draw; raw and processed
//! log-probs; scored prompt rows (a forced token) among sampled ones.

mod common;

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
        let mut u = SampleUniform::new(spec, (penalties.len() / 2) as u32);
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
        if spec.params.has_penalties() {
            for p in &spec.penalty_tokens {
                penalties.extend([p.token_id, p.output_count | (u32::from(p.seen) << 31)]);
            }
        }
    }
    let logits: Vec<Vec<f32>> = rows.iter().map(|(l, _)| l.clone()).collect();
    dispatch(ctx, k, vocab, &logits, &uniforms, penalties, masks)
}

/// One dispatch of the sampler over packed rows.
fn dispatch(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    vocab: usize,
    rows: &[Vec<f32>],
    uniforms: &[SampleUniform],
    mut penalties: Vec<u32>,
    mut masks: Vec<u32>,
) -> Vec<Out> {
    let logits: Vec<f32> = rows.concat();
    penalties.extend([0, 0]); // a binding may not be empty
    masks.push(0);
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

#[test]
fn greedy_picks_argmax_with_logprobs() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(10);
    for vocab in [1000usize, 4099] {
        let mut rows: Vec<(Vec<f32>, SampleSpec)> = (0..12)
            .map(|i| {
                let p = SamplingParams {
                    top_logprobs: [0, 5, 20][i % 3],
                    ..SamplingParams::greedy()
                };
                (randn(&mut r, vocab, 8.0), spec(p, i as u64, 0))
            })
            .collect();
        // A tie for the maximum resolves to the lower index; the max sits in the last stride.
        let mut tie = randn(&mut r, vocab, 1.0);
        tie[vocab - 1] = 5.0;
        tie[vocab - 3] = 5.0;
        rows.push((
            tie,
            spec(
                SamplingParams {
                    top_logprobs: 3,
                    ..SamplingParams::greedy()
                },
                0,
                0,
            ),
        ));
        let out = sample(&ctx, &k, vocab, &rows);
        for (i, ((l, s), o)) in rows.iter().zip(&out).enumerate() {
            let (rank, lp) = (ranked(l), log_softmax(l, 0.0));
            assert_eq!(o.id as usize, rank[0], "vocab {vocab} row {i}: argmax");
            assert!(
                (o.logprob as f64 - lp[rank[0]]).abs() < 1e-4,
                "vocab {vocab} row {i}: logprob {} vs {}",
                o.logprob,
                lp[rank[0]]
            );
            for (n, &(id, v)) in o
                .top
                .iter()
                .take(s.params.top_logprobs as usize)
                .enumerate()
            {
                assert_eq!(id as usize, rank[n], "vocab {vocab} row {i}: top-{n} id");
                assert!(
                    (v as f64 - lp[rank[n]]).abs() < 1e-4,
                    "vocab {vocab} row {i}: top-{n} logprob {v} vs {}",
                    lp[rank[n]]
                );
            }
        }
        assert_eq!(
            out.last().unwrap().id as usize,
            vocab - 3,
            "tie goes to the lower index"
        );
    }
}

#[test]
fn seeded_draws_are_reproducible() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 1000;
    let flat = vec![0f32; vocab];
    let t1 = SamplingParams::default();
    // 64 seeds, then the same 64 in reverse order behind 7 other rows: same draws.
    let rows: Vec<_> = (0..64)
        .map(|s| (flat.clone(), spec(t1, 1000 + s, 3)))
        .collect();
    let a: Vec<u32> = sample(&ctx, &k, vocab, &rows)
        .iter()
        .map(|o| o.id)
        .collect();
    let mut shuffled: Vec<_> = (0..7)
        .map(|s| (flat.clone(), spec(t1, 77 + s, 0)))
        .collect();
    shuffled.extend(rows.iter().rev().cloned());
    let b: Vec<u32> = sample(&ctx, &k, vocab, &shuffled)[7..]
        .iter()
        .rev()
        .map(|o| o.id)
        .collect();
    assert_eq!(
        a, b,
        "same seed and draw index, same token, whatever shares the batch"
    );
    let mut distinct = a.clone();
    distinct.sort();
    distinct.dedup();
    // 64 uniform draws from 1000 tokens: about 62 distinct expected, < 55 is ~1e-6 likely.
    assert!(
        distinct.len() >= 55,
        "different seeds give different draws: {} distinct of 64",
        distinct.len()
    );
    let again: Vec<u32> = sample(
        &ctx,
        &k,
        vocab,
        &rows
            .iter()
            .map(|(l, s)| {
                (
                    l.clone(),
                    SampleSpec {
                        draw_index: 4,
                        ..s.clone()
                    },
                )
            })
            .collect::<Vec<_>>(),
    )
    .iter()
    .map(|o| o.id)
    .collect();
    assert!(
        a.iter().zip(&again).filter(|(x, y)| x == y).count() < 8,
        "the draw index changes the draw"
    );

    // top_k = 1 is greedy whatever the temperature and seed; its processed log-prob is under
    // the temperature-scaled distribution, as `SampledToken::logprob` documents.
    let mut r = rng(11);
    let rows: Vec<_> = (0..16)
        .map(|s| {
            (
                randn(&mut r, vocab, 3.0),
                spec(
                    SamplingParams {
                        temperature: 0.7,
                        top_k: 1,
                        top_logprobs: 2,
                        logprobs_mode: LogprobsMode::Processed,
                        ..t1
                    },
                    s,
                    s as u32,
                ),
            )
        })
        .collect();
    for (i, ((l, _), o)) in rows.iter().zip(sample(&ctx, &k, vocab, &rows)).enumerate() {
        let (rank, lp) = (ranked(l), log_softmax(l, 0.7));
        assert_eq!(o.id as usize, rank[0], "row {i}: top_k=1 is the argmax");
        assert!(
            (o.logprob as f64 - lp[rank[0]]).abs() < 1e-4,
            "row {i}: logprob {} vs {} (T=0.7)",
            o.logprob,
            lp[rank[0]]
        );
    }
}

/// The distribution the kernel should draw from: temperature, then top-k, then top-p on the
/// top-k set, then min-p; renormalised; 0 for dropped tokens.
fn kept_distribution(l: &[f32], p: &SamplingParams) -> Vec<f64> {
    let probs: Vec<f64> = log_softmax(l, p.temperature)
        .iter()
        .map(|v| v.exp())
        .collect();
    let rank = ranked(l);
    let mut keep = if p.top_k > 0 {
        (p.top_k as usize).min(l.len())
    } else {
        l.len()
    };
    let top_k_mass: f64 = rank[..keep].iter().map(|&i| probs[i]).sum();
    if p.top_p < 1.0 {
        let (mut cum, mut n) = (0.0, 0);
        while n < keep && cum < p.top_p as f64 * top_k_mass {
            cum += probs[rank[n]];
            n += 1;
        }
        keep = n;
    }
    let pmax = probs[rank[0]];
    keep = rank[..keep]
        .iter()
        .take_while(|&&i| probs[i] >= p.min_p as f64 * pmax)
        .count();
    let z: f64 = rank[..keep].iter().map(|&i| probs[i]).sum();
    let mut out = vec![0.0; l.len()];
    rank[..keep].iter().for_each(|&i| out[i] = probs[i] / z);
    out
}

#[test]
fn draws_follow_the_filtered_distribution() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(12);
    // Logits 2.0, 1.5, ..., -2.5 at shuffled token ids, so rank and id differ.
    let mut logits: Vec<f32> = (0..10).map(|i| 2.0 - 0.5 * i as f32).collect();
    logits.shuffle(&mut r);
    let base = SamplingParams::default();
    let cases = [
        (
            "temperature 0.7",
            SamplingParams {
                temperature: 0.7,
                ..base
            },
            10,
        ),
        ("top_k 3", SamplingParams { top_k: 3, ..base }, 3),
        ("top_p 0.8", SamplingParams { top_p: 0.8, ..base }, 4),
        ("min_p 0.2", SamplingParams { min_p: 0.2, ..base }, 4),
        (
            "top_k 5 + top_p 0.8 at T 1.5",
            SamplingParams {
                temperature: 1.5,
                top_k: 5,
                top_p: 0.8,
                ..base
            },
            4,
        ),
    ];
    let (rows_per_dispatch, dispatches) = (512, 5);
    let n = (rows_per_dispatch * dispatches) as f64;
    for (ci, (name, params, kept)) in cases.iter().enumerate() {
        let want = kept_distribution(&logits, params);
        assert_eq!(
            want.iter().filter(|&&p| p > 0.0).count(),
            *kept,
            "{name}: CPU kept set"
        );
        let mut counts = vec![0usize; logits.len()];
        for d in 0..dispatches {
            let rows: Vec<_> = (0..rows_per_dispatch)
                .map(|i| {
                    (
                        logits.clone(),
                        spec(
                            *params,
                            ((ci * 1_000_000 + d * 1000 + i) as u64)
                                .wrapping_mul(0x9e37_79b9_7f4a_7c15),
                            r.random(),
                        ),
                    )
                })
                .collect();
            sample(&ctx, &k, logits.len(), &rows)
                .iter()
                .for_each(|o| counts[o.id as usize] += 1);
        }
        for (tok, (&c, &p)) in counts.iter().zip(&want).enumerate() {
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
}

/// The penalised logits the kernel should see: repetition on seen tokens, then presence once
/// and frequency per occurrence for tokens in the output.
fn penalised(l: &[f32], s: &SampleSpec) -> Vec<f32> {
    let mut l = l.to_vec();
    let p = &s.params;
    for t in &s.penalty_tokens {
        let v = &mut l[t.token_id as usize];
        if t.seen {
            *v = if *v > 0.0 {
                *v / p.repetition_penalty
            } else {
                *v * p.repetition_penalty
            };
        }
        if t.output_count > 0 {
            *v -= p.presence_penalty + p.frequency_penalty * t.output_count as f32;
        }
    }
    l
}

#[test]
fn penalties_change_greedy_choice_as_the_formula_says() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 500;
    let g = SamplingParams {
        logprobs_mode: LogprobsMode::Processed,
        ..SamplingParams::greedy()
    };
    let hist = |id, output_count, seen| PenaltyToken {
        token_id: id,
        output_count,
        seen,
    };
    // Hand-made: token 7 leads at 3.0, token 9 follows at 2.5 (all others in [-1, 1]); in
    // the negative row token 7 leads at -0.5 and token 9 follows at -0.6.
    let mut r = rng(13);
    let mut pos = randn(&mut r, vocab, 1.0);
    (pos[7], pos[9]) = (3.0, 2.5);
    let neg: Vec<f32> = (0..vocab)
        .map(|i| {
            if i == 7 {
                -0.5
            } else if i == 9 {
                -0.6
            } else {
                -1.0 - i as f32 * 1e-3
            }
        })
        .collect();
    // (name, logits, sampling, penalised tokens, expected token)
    type Case<'a> = (&'a str, &'a [f32], SamplingParams, Vec<PenaltyToken>, u32);
    let cases: Vec<Case> = vec![
        (
            "repetition divides a positive logit",
            &pos[..],
            SamplingParams {
                repetition_penalty: 1.5,
                ..g
            },
            vec![hist(7, 0, true)],
            9,
        ),
        (
            "repetition skips unseen tokens",
            &pos,
            SamplingParams {
                repetition_penalty: 1.5,
                ..g
            },
            vec![hist(7, 0, false)],
            7,
        ),
        (
            "repetition multiplies a negative logit",
            &neg,
            SamplingParams {
                repetition_penalty: 1.5,
                ..g
            },
            vec![hist(7, 0, true)],
            9,
        ),
        (
            "presence needs an output occurrence",
            &pos,
            SamplingParams {
                presence_penalty: 2.0,
                ..g
            },
            vec![hist(7, 0, true)],
            7,
        ),
        (
            "presence subtracts once",
            &pos,
            SamplingParams {
                presence_penalty: 0.6,
                ..g
            },
            vec![hist(7, 5, true)],
            9,
        ),
        (
            "presence too small",
            &pos,
            SamplingParams {
                presence_penalty: 0.4,
                ..g
            },
            vec![hist(7, 5, true)],
            7,
        ),
        (
            "frequency times count",
            &pos,
            SamplingParams {
                frequency_penalty: 0.2,
                ..g
            },
            vec![hist(7, 3, true)],
            9,
        ),
        (
            "frequency count too low",
            &pos,
            SamplingParams {
                frequency_penalty: 0.2,
                ..g
            },
            vec![hist(7, 2, true)],
            7,
        ),
        (
            "negative presence promotes",
            &pos,
            SamplingParams {
                presence_penalty: -0.6,
                ..g
            },
            vec![hist(9, 1, true)],
            9,
        ),
        (
            "all three combined",
            &pos,
            SamplingParams {
                repetition_penalty: 1.2,
                presence_penalty: 0.1,
                frequency_penalty: 0.05,
                ..g
            },
            vec![hist(7, 1, true), hist(9, 0, true)], // 3/1.2-0.15 = 2.35 vs 2.5/1.2 = 2.083
            7,
        ),
    ];
    let mut rows: Vec<(Vec<f32>, SampleSpec)> = cases
        .iter()
        .map(|(_, l, p, h, _)| {
            (
                l.to_vec(),
                SampleSpec {
                    params: *p,
                    seed: 0,
                    draw_index: 0,
                    penalty_tokens: h.clone(),
                },
            )
        })
        .collect();
    // Random rows: penalties on the top-5 tokens and 10 others, various strengths.
    let mut changed = 0;
    for _ in 0..24 {
        let l = randn(&mut r, vocab, 2.0);
        let mut ids: Vec<u32> = ranked(&l)[..5].iter().map(|&i| i as u32).collect();
        while ids.len() < 15 {
            let t = r.random_range(0..vocab as u32);
            if !ids.contains(&t) {
                ids.push(t);
            }
        }
        let params = SamplingParams {
            repetition_penalty: r.random_range(1.0..2.0),
            presence_penalty: r.random_range(-0.5..1.5),
            frequency_penalty: r.random_range(-0.3..0.8),
            top_logprobs: 3,
            ..g
        };
        let history = ids
            .iter()
            .map(|&t| hist(t, r.random_range(0..4), r.random_bool(0.8)))
            .collect();
        let s = SampleSpec {
            params,
            seed: 0,
            draw_index: 0,
            penalty_tokens: history,
        };
        changed += (ranked(&penalised(&l, &s))[0] != ranked(&l)[0]) as usize;
        rows.push((l, s));
    }
    assert!(
        changed >= 8,
        "the random penalties should move the argmax in many rows, moved {changed}"
    );
    let out = sample(&ctx, &k, vocab, &rows);
    for (i, ((l, s), o)) in rows.iter().zip(&out).enumerate() {
        let what = cases
            .get(i)
            .map_or(format!("random row {i}"), |c| c.0.to_string());
        let pl = penalised(l, s);
        let (rank, lp) = (ranked(&pl), log_softmax(&pl, 0.0));
        assert_eq!(
            o.id as usize, rank[0],
            "{what}: argmax of the penalised logits"
        );
        if let Some(c) = cases.get(i) {
            assert_eq!(o.id, c.4, "{what}: expected token");
        }
        assert!(
            (o.logprob as f64 - lp[rank[0]]).abs() < 1e-4,
            "{what}: logprob {} vs {}",
            o.logprob,
            lp[rank[0]]
        );
        for (n, &(id, _)) in o
            .top
            .iter()
            .take(s.params.top_logprobs as usize)
            .enumerate()
        {
            assert_eq!(id as usize, rank[n], "{what}: top-{n} after penalties");
        }
    }
}

/// Log-softmax over the entries where `keep` holds (others: None).
fn log_softmax_kept(l: &[f32], keep: &[bool], temperature: f32) -> Vec<Option<f64>> {
    let t = if temperature > 0.0 {
        temperature as f64
    } else {
        1.0
    };
    let kept = || {
        l.iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(&v, _)| v as f64 / t)
    };
    let m = kept().fold(f64::MIN, f64::max);
    let lse = m + kept().map(|v| (v - m).exp()).sum::<f64>().ln();
    l.iter()
        .zip(keep)
        .map(|(&v, &k)| k.then(|| v as f64 / t - lse))
        .collect()
}

#[test]
fn masks_and_non_finite_logits_are_left_out() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(14);
    for vocab in [1000usize, 4099] {
        let (mut rows, mut allow) = (Vec::new(), Vec::new());
        for i in 0..16 {
            let mut l = randn(&mut r, vocab, 6.0);
            // Non-finite logits; the largest values sit on masked or non-finite tokens so a
            // sampler that ignored the mask would pick them.
            for _ in 0..vocab / 10 {
                let j = r.random_range(0..vocab);
                l[j] = [f32::NEG_INFINITY, f32::NAN, f32::INFINITY][r.random_range(0..3)];
            }
            let a: Vec<bool> = (0..vocab)
                .map(|j| l[j].is_finite() && (i % 4 == 3 || r.random_bool(0.1)))
                .collect();
            let a = if i % 4 == 3 { None } else { Some(a) };
            if let Some(a) = &a {
                let first_masked = (0..vocab).find(|&j| !a[j] && l[j].is_finite()).unwrap();
                l[first_masked] = 50.0;
            }
            let mode = if i % 2 == 0 {
                LogprobsMode::Raw
            } else {
                LogprobsMode::Processed
            };
            let p = SamplingParams {
                top_logprobs: [0, 3, 20][i % 3],
                logprobs_mode: mode,
                ..SamplingParams::greedy()
            };
            rows.push((l, spec(p, i as u64, 0)));
            allow.push(a);
        }
        let out = sample_masked(&ctx, &k, vocab, &rows, &allow);
        for (i, (((l, s), a), o)) in rows.iter().zip(&allow).zip(&out).enumerate() {
            let keep: Vec<bool> = (0..vocab)
                .map(|j| l[j].is_finite() && a.as_ref().is_none_or(|a| a[j]))
                .collect();
            let masked: Vec<f32> = l
                .iter()
                .zip(&keep)
                .map(|(&v, &k)| if k { v } else { f32::NEG_INFINITY })
                .collect();
            let best = ranked(&masked)[0];
            assert_eq!(
                o.id as usize, best,
                "vocab {vocab} row {i}: argmax over kept tokens"
            );
            let n = s.params.top_logprobs as usize;
            if n == 0 {
                continue;
            }
            let (lp, order) = match s.params.logprobs_mode {
                LogprobsMode::Processed => (log_softmax_kept(l, &keep, 0.0), ranked(&masked)),
                LogprobsMode::Raw => {
                    let finite: Vec<bool> = l.iter().map(|v| v.is_finite()).collect();
                    let raw: Vec<f32> = l
                        .iter()
                        .map(|&v| if v.is_finite() { v } else { f32::NEG_INFINITY })
                        .collect();
                    (log_softmax_kept(l, &finite, 0.0), ranked(&raw))
                }
            };
            let want = lp[best].unwrap();
            assert!(
                (o.logprob as f64 - want).abs() < 1e-4,
                "vocab {vocab} row {i} {:?}: logprob {} vs {want}",
                s.params.logprobs_mode,
                o.logprob
            );
            for (j, &(id, v)) in o.top.iter().take(n).enumerate() {
                assert_eq!(id as usize, order[j], "vocab {vocab} row {i}: top-{j} id");
                let w = lp[order[j]].unwrap();
                assert!(
                    (v as f64 - w).abs() < 1e-4,
                    "vocab {vocab} row {i}: top-{j} logprob {v} vs {w}"
                );
            }
        }
    }
}

#[test]
fn raw_logprobs_ignore_penalties_and_temperature() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(15);
    let vocab = 777;
    let rows: Vec<_> = (0..12)
        .map(|i| {
            let l = randn(&mut r, vocab, 3.0);
            let top: Vec<u32> = ranked(&l)[..6].iter().map(|&t| t as u32).collect();
            let history = top
                .iter()
                .map(|&t| PenaltyToken {
                    token_id: t,
                    output_count: 2,
                    seen: true,
                })
                .collect();
            let params = SamplingParams {
                temperature: [0.0, 0.6, 1.3][i % 3],
                // Mild penalties on the top tokens: they change the logits but often not the
                // choice, so chosen tokens include penalised ones (whose raw value is needed).
                repetition_penalty: 1.02,
                presence_penalty: 0.01,
                top_logprobs: 4,
                ..SamplingParams::default()
            };
            (
                l,
                SampleSpec {
                    params,
                    seed: i as u64,
                    draw_index: 0,
                    penalty_tokens: history,
                },
            )
        })
        .collect();
    let out = sample(&ctx, &k, vocab, &rows);
    let mut penalised_picks = 0;
    for (i, ((l, s), o)) in rows.iter().zip(&out).enumerate() {
        let lp = log_softmax(l, 0.0);
        let rank = ranked(l);
        assert!(
            (o.logprob as f64 - lp[o.id as usize]).abs() < 1e-4,
            "row {i}: raw logprob of {} is {} vs {}",
            o.id,
            o.logprob,
            lp[o.id as usize]
        );
        for (j, &(id, v)) in o.top.iter().take(4).enumerate() {
            assert_eq!(id as usize, rank[j], "row {i}: raw top-{j}");
            assert!(
                (v as f64 - lp[rank[j]]).abs() < 1e-4,
                "row {i}: raw top-{j} logprob"
            );
        }
        penalised_picks += s.penalty_tokens.iter().any(|p| p.token_id == o.id) as usize;
    }
    assert!(
        penalised_picks > 0,
        "some chosen tokens should be penalised ones, to test their raw value"
    );
}

#[test]
fn rows_without_an_allowed_token_report_none() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 300;
    let p = SamplingParams {
        top_logprobs: 2,
        top_k: 5,
        top_p: 0.9,
        ..SamplingParams::default()
    };
    let rows = vec![
        (vec![1.0; vocab], spec(p, 1, 0)),
        (vec![f32::NAN; vocab], spec(p, 2, 0)),
        (
            vec![f32::NEG_INFINITY; vocab],
            spec(SamplingParams::greedy(), 3, 0),
        ),
        (vec![1.0; vocab], spec(p, 4, 0)),
    ];
    let mut one = vec![false; vocab];
    one[vocab - 1] = true;
    let allow = vec![Some(vec![false; vocab]), None, None, Some(one)];
    let out = sample_masked(&ctx, &k, vocab, &rows, &allow);
    for (i, o) in out[..3].iter().enumerate() {
        assert_eq!(o.id, NO_TOKEN, "row {i}: nothing allowed");
    }
    assert_eq!(out[3].id as usize, vocab - 1, "the only allowed token");
}

#[test]
fn masked_draws_follow_the_filtered_distribution() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(16);
    // 40 tokens: 10 allowed with logits 2.0 .. -2.5, the rest masked (large logits), -inf or NaN.
    let vocab = 40;
    let mut ids: Vec<usize> = (0..vocab).collect();
    ids.shuffle(&mut r);
    let mut logits = vec![0f32; vocab];
    let mut allow = vec![false; vocab];
    for (n, &t) in ids.iter().enumerate() {
        if n < 10 {
            logits[t] = 2.0 - 0.5 * n as f32;
            allow[t] = true;
        } else {
            logits[t] = [9.0, f32::NEG_INFINITY, f32::NAN, -3.0e38][n % 4];
        }
    }
    let kept_idx: Vec<usize> = (0..vocab).filter(|&t| allow[t]).collect();
    let sub: Vec<f32> = kept_idx.iter().map(|&t| logits[t]).collect();
    let base = SamplingParams::default();
    let cases = [
        ("top_k 3", SamplingParams { top_k: 3, ..base }),
        ("top_p 0.8", SamplingParams { top_p: 0.8, ..base }),
        (
            "top_k 5 + top_p 0.8 at T 1.5",
            SamplingParams {
                temperature: 1.5,
                top_k: 5,
                top_p: 0.8,
                ..base
            },
        ),
    ];
    let (per, dispatches) = (512, 4);
    let n = (per * dispatches) as f64;
    for (ci, (name, params)) in cases.iter().enumerate() {
        let want_sub = kept_distribution(&sub, params);
        let mut want = vec![0.0; vocab];
        kept_idx
            .iter()
            .zip(&want_sub)
            .for_each(|(&t, &p)| want[t] = p);
        let mut counts = vec![0usize; vocab];
        for d in 0..dispatches {
            let rows: Vec<_> = (0..per)
                .map(|i| {
                    (
                        logits.clone(),
                        spec(
                            *params,
                            (ci * 1_000_000 + d * 1000 + i) as u64 * 0x9e37_79b9,
                            r.random(),
                        ),
                    )
                })
                .collect();
            let masks = vec![Some(allow.clone()); per];
            sample_masked(&ctx, &k, vocab, &rows, &masks)
                .iter()
                .for_each(|o| counts[o.id as usize] += 1);
        }
        for (tok, (&c, &p)) in counts.iter().zip(&want).enumerate() {
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
                    "{name}: token {tok}: frequency {freq:.4}, expected {p:.4} ± {tol:.4}"
                );
            }
        }
    }
}

/// Scored prompt rows (a forced token, `SampleUniform::scored`) mixed with greedy sampled
/// rows in the same dispatch: each scored row reports its forced
/// token with the raw log-softmax's value and its rank, whatever it is, and the top-n of the
/// raw logits; -inf logits stay out of the top-n. The sampled rows are as if alone.
#[test]
fn scored_rows_report_the_forced_token() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut rng = rng(41);
    for vocab in [1, 7, 255, 1000, 4099] {
        let mut rows = Vec::new();
        let mut uniforms = Vec::new();
        let mut forced = Vec::new();
        for i in 0..9 {
            let mut l: Vec<f32> = (0..vocab).map(|_| rng.random_range(-8.0..8.0)).collect();
            if i % 4 == 3 && vocab > 1 {
                l[rng.random_range(0..vocab)] = f32::NEG_INFINITY;
            }
            if i % 3 == 0 {
                // A greedy sampled row: the forced rows around it must not change it.
                let s = spec(
                    SamplingParams {
                        temperature: 0.0,
                        top_logprobs: 2,
                        ..Default::default()
                    },
                    3,
                    0,
                );
                uniforms.push(SampleUniform::new(&s, 0));
                forced.push(None);
            } else {
                let target = loop {
                    let t = rng.random_range(0..vocab);
                    if l[t].is_finite() {
                        break t as u32;
                    }
                };
                let score = PromptScore {
                    first_row: 0,
                    targets: vec![target],
                    top_logprobs: [0, 1, 5][i % 3],
                };
                uniforms.push(SampleUniform::scored(&score, target));
                forced.push(Some(target));
            }
            rows.push(l);
        }
        let out = dispatch(&ctx, &k, vocab, &rows, &uniforms, Vec::new(), Vec::new());
        for (i, ((l, f), o)) in rows.iter().zip(&forced).zip(&out).enumerate() {
            let lp = log_softmax(l, 1.0);
            let rank = ranked(l);
            let what = format!("vocab {vocab} row {i}");
            let id = f.unwrap_or(rank[0] as u32);
            assert_eq!(o.id, id, "{what}: token");
            assert!(
                (o.logprob as f64 - lp[id as usize]).abs() < 1e-4,
                "{what}: logprob {} vs {}",
                o.logprob,
                lp[id as usize]
            );
            if f.is_some() {
                let above = l.iter().filter(|&&v| v > l[id as usize]).count() as u32;
                assert_eq!(o.rank, above + 1, "{what}: rank");
            }
            let n = uniforms[i].top_logprobs as usize;
            let finite = l.iter().filter(|v| v.is_finite()).count();
            for (j, &(tid, v)) in o.top.iter().take(n).enumerate() {
                if j >= finite {
                    assert_eq!(tid, NO_TOKEN, "{what}: top-{j} past the finite tokens");
                    continue;
                }
                assert_eq!(tid as usize, rank[j], "{what}: top-{j} id");
                assert!(
                    (v as f64 - lp[rank[j]]).abs() < 1e-4,
                    "{what}: top-{j} logprob"
                );
            }
        }
    }
}
