//! The sampling kernel (`shaders/sample.wgsl`) driven directly, many rows per dispatch:
//! greedy argmax and log-probs (chosen and top-n) against a CPU f64 log-softmax on awkward
//! vocab sizes; seeded determinism; the empirical distribution of seeded draws against the
//! CPU-computed kept set and renormalised probabilities for temperature, top-k, top-p and
//! min-p; and repetition / presence / frequency penalties against the CPU formula.

mod common;

use common::*;
use kiln_core::{PenaltyToken, SampleSpec, SamplingParams};
use kiln_gpu::Kernels;
use kiln_gpu::ops::{self, SAMPLE_OUT_STRIDE, SampleUniform};
use rand::Rng;
use rand::seq::SliceRandom;

struct Out {
    id: u32,
    logprob: f32,
    /// All 20 (id, logprob) slots; only the first `top_logprobs` are meaningful.
    top: Vec<(u32, f32)>,
}

/// One dispatch of the sampler over `rows.len()` rows of `vocab` logits each, with the
/// penalty list packed as the runner packs it (`token, count | seen << 31`).
fn sample(ctx: &kiln_gpu::GpuContext, k: &Kernels, vocab: usize, rows: &[(Vec<f32>, SampleSpec)]) -> Vec<Out> {
    let (mut logits, mut uniforms, mut penalties) = (Vec::new(), Vec::new(), Vec::new());
    for (l, spec) in rows {
        assert_eq!(l.len(), vocab);
        logits.extend_from_slice(l);
        uniforms.push(SampleUniform::new(spec, (penalties.len() / 2) as u32));
        if spec.params.has_penalties() {
            for p in &spec.penalty_tokens {
                penalties.extend([p.token_id, p.output_count | (u32::from(p.seen) << 31)]);
            }
        }
    }
    penalties.extend([0, 0]); // a binding may not be empty
    let n = rows.len();
    let step = step_buffer(ctx, n as u32, n as u32, n as u32);
    let sampling = ctx.storage_init("sampling", bytemuck::cast_slice(&uniforms));
    let (pb, lb) = (buf_u32(ctx, &penalties), buf_f32(ctx, &logits));
    let out = ctx.storage("out", (n * SAMPLE_OUT_STRIDE * 4) as u64);
    let l = ops::sample(ctx, k, &step, vocab, &sampling, &pb, &lb, &out);
    run_launches(ctx, &[&l], n as u32, n as u32);
    read_u32(ctx, &out, n * SAMPLE_OUT_STRIDE)
        .chunks(SAMPLE_OUT_STRIDE)
        .map(|w| Out {
            id: w[0],
            logprob: f32::from_bits(w[1]),
            top: (0..20).map(|i| (w[2 + 2 * i], f32::from_bits(w[3 + 2 * i]))).collect(),
        })
        .collect()
}

fn spec(params: SamplingParams, seed: u64, draw_index: u32) -> SampleSpec {
    SampleSpec { params, seed, draw_index, penalty_tokens: vec![] }
}

fn log_softmax(l: &[f32], temperature: f32) -> Vec<f64> {
    let t = if temperature > 0.0 { temperature as f64 } else { 1.0 };
    let m = l.iter().map(|&v| v as f64 / t).fold(f64::MIN, f64::max);
    let lse = m + l.iter().map(|&v| (v as f64 / t - m).exp()).sum::<f64>().ln();
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
                let p = SamplingParams { top_logprobs: [0, 5, 20][i % 3], ..SamplingParams::greedy() };
                (randn(&mut r, vocab, 8.0), spec(p, i as u64, 0))
            })
            .collect();
        // A tie for the maximum resolves to the lower index; the max sits in the last stride.
        let mut tie = randn(&mut r, vocab, 1.0);
        tie[vocab - 1] = 5.0;
        tie[vocab - 3] = 5.0;
        rows.push((tie, spec(SamplingParams { top_logprobs: 3, ..SamplingParams::greedy() }, 0, 0)));
        let out = sample(&ctx, &k, vocab, &rows);
        for (i, ((l, s), o)) in rows.iter().zip(&out).enumerate() {
            let (rank, lp) = (ranked(l), log_softmax(l, 0.0));
            assert_eq!(o.id as usize, rank[0], "vocab {vocab} row {i}: argmax");
            assert!((o.logprob as f64 - lp[rank[0]]).abs() < 1e-4, "vocab {vocab} row {i}: logprob {} vs {}", o.logprob, lp[rank[0]]);
            for (n, &(id, v)) in o.top.iter().take(s.params.top_logprobs as usize).enumerate() {
                assert_eq!(id as usize, rank[n], "vocab {vocab} row {i}: top-{n} id");
                assert!((v as f64 - lp[rank[n]]).abs() < 1e-4, "vocab {vocab} row {i}: top-{n} logprob {v} vs {}", lp[rank[n]]);
            }
        }
        assert_eq!(out.last().unwrap().id as usize, vocab - 3, "tie goes to the lower index");
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
    let rows: Vec<_> = (0..64).map(|s| (flat.clone(), spec(t1, 1000 + s, 3))).collect();
    let a: Vec<u32> = sample(&ctx, &k, vocab, &rows).iter().map(|o| o.id).collect();
    let mut shuffled: Vec<_> = (0..7).map(|s| (flat.clone(), spec(t1, 77 + s, 0))).collect();
    shuffled.extend(rows.iter().rev().cloned());
    let b: Vec<u32> = sample(&ctx, &k, vocab, &shuffled)[7..].iter().rev().map(|o| o.id).collect();
    assert_eq!(a, b, "same seed and draw index, same token, whatever shares the batch");
    let mut distinct = a.clone();
    distinct.sort();
    distinct.dedup();
    // 64 uniform draws from 1000 tokens: about 62 distinct expected, < 55 is ~1e-6 likely.
    assert!(distinct.len() >= 55, "different seeds give different draws: {} distinct of 64", distinct.len());
    let again: Vec<u32> = sample(&ctx, &k, vocab, &rows.iter().map(|(l, s)| (l.clone(), SampleSpec { draw_index: 4, ..s.clone() })).collect::<Vec<_>>())
        .iter()
        .map(|o| o.id)
        .collect();
    assert!(a.iter().zip(&again).filter(|(x, y)| x == y).count() < 8, "the draw index changes the draw");

    // top_k = 1 is greedy whatever the temperature and seed; its log-prob is under the
    // temperature-scaled distribution, as `SampledToken::logprob` documents.
    let mut r = rng(11);
    let rows: Vec<_> = (0..16)
        .map(|s| (randn(&mut r, vocab, 3.0), spec(SamplingParams { temperature: 0.7, top_k: 1, top_logprobs: 2, ..t1 }, s, s as u32)))
        .collect();
    for (i, ((l, _), o)) in rows.iter().zip(sample(&ctx, &k, vocab, &rows)).enumerate() {
        let (rank, lp) = (ranked(l), log_softmax(l, 0.7));
        assert_eq!(o.id as usize, rank[0], "row {i}: top_k=1 is the argmax");
        assert!((o.logprob as f64 - lp[rank[0]]).abs() < 1e-4, "row {i}: logprob {} vs {} (T=0.7)", o.logprob, lp[rank[0]]);
    }
}

/// The distribution the kernel should draw from: temperature, then top-k, then top-p on the
/// top-k set, then min-p; renormalised; 0 for dropped tokens.
fn kept_distribution(l: &[f32], p: &SamplingParams) -> Vec<f64> {
    let probs: Vec<f64> = log_softmax(l, p.temperature).iter().map(|v| v.exp()).collect();
    let rank = ranked(l);
    let mut keep = if p.top_k > 0 { (p.top_k as usize).min(l.len()) } else { l.len() };
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
    keep = rank[..keep].iter().take_while(|&&i| probs[i] >= p.min_p as f64 * pmax).count();
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
        ("temperature 0.7", SamplingParams { temperature: 0.7, ..base }, 10),
        ("top_k 3", SamplingParams { top_k: 3, ..base }, 3),
        ("top_p 0.8", SamplingParams { top_p: 0.8, ..base }, 4),
        ("min_p 0.2", SamplingParams { min_p: 0.2, ..base }, 4),
        ("top_k 5 + top_p 0.8 at T 1.5", SamplingParams { temperature: 1.5, top_k: 5, top_p: 0.8, ..base }, 4),
    ];
    let (rows_per_dispatch, dispatches) = (512, 5);
    let n = (rows_per_dispatch * dispatches) as f64;
    for (ci, (name, params, kept)) in cases.iter().enumerate() {
        let want = kept_distribution(&logits, params);
        assert_eq!(want.iter().filter(|&&p| p > 0.0).count(), *kept, "{name}: CPU kept set");
        let mut counts = vec![0usize; logits.len()];
        for d in 0..dispatches {
            let rows: Vec<_> = (0..rows_per_dispatch)
                .map(|i| (logits.clone(), spec(*params, ((ci * 1_000_000 + d * 1000 + i) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), r.random())))
                .collect();
            sample(&ctx, &k, logits.len(), &rows).iter().for_each(|o| counts[o.id as usize] += 1);
        }
        for (tok, (&c, &p)) in counts.iter().zip(&want).enumerate() {
            let freq = c as f64 / n;
            if p == 0.0 {
                assert_eq!(c, 0, "{name}: token {tok} (logit {}) is filtered out but was drawn {c} times", logits[tok]);
            } else {
                let tol = 4.0 * (p * (1.0 - p) / n).sqrt() + 0.01;
                assert!((freq - p).abs() <= tol, "{name}: token {tok} (logit {}): frequency {freq:.4}, expected {p:.4} ± {tol:.4}", logits[tok]);
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
            *v = if *v > 0.0 { *v / p.repetition_penalty } else { *v * p.repetition_penalty };
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
    let g = SamplingParams::greedy();
    let hist = |id, output_count, seen| PenaltyToken { token_id: id, output_count, seen };
    // Hand-made: token 7 leads at 3.0, token 9 follows at 2.5 (all others in [-1, 1]); in
    // the negative row token 7 leads at -0.5 and token 9 follows at -0.6.
    let mut r = rng(13);
    let mut pos = randn(&mut r, vocab, 1.0);
    (pos[7], pos[9]) = (3.0, 2.5);
    let neg: Vec<f32> = (0..vocab).map(|i| if i == 7 { -0.5 } else if i == 9 { -0.6 } else { -1.0 - i as f32 * 1e-3 }).collect();
    let cases: Vec<(&str, &[f32], SamplingParams, Vec<PenaltyToken>, u32)> = vec![
        ("repetition divides a positive logit", &pos[..], SamplingParams { repetition_penalty: 1.5, ..g }, vec![hist(7, 0, true)], 9),
        ("repetition skips unseen tokens", &pos, SamplingParams { repetition_penalty: 1.5, ..g }, vec![hist(7, 0, false)], 7),
        ("repetition multiplies a negative logit", &neg, SamplingParams { repetition_penalty: 1.5, ..g }, vec![hist(7, 0, true)], 9),
        ("presence needs an output occurrence", &pos, SamplingParams { presence_penalty: 2.0, ..g }, vec![hist(7, 0, true)], 7),
        ("presence subtracts once", &pos, SamplingParams { presence_penalty: 0.6, ..g }, vec![hist(7, 5, true)], 9),
        ("presence too small", &pos, SamplingParams { presence_penalty: 0.4, ..g }, vec![hist(7, 5, true)], 7),
        ("frequency times count", &pos, SamplingParams { frequency_penalty: 0.2, ..g }, vec![hist(7, 3, true)], 9),
        ("frequency count too low", &pos, SamplingParams { frequency_penalty: 0.2, ..g }, vec![hist(7, 2, true)], 7),
        ("negative presence promotes", &pos, SamplingParams { presence_penalty: -0.6, ..g }, vec![hist(9, 1, true)], 9),
        (
            "all three combined",
            &pos,
            SamplingParams { repetition_penalty: 1.2, presence_penalty: 0.1, frequency_penalty: 0.05, ..g },
            vec![hist(7, 1, true), hist(9, 0, true)], // 3/1.2-0.15 = 2.35 vs 2.5/1.2 = 2.083
            7,
        ),
    ];
    let mut rows: Vec<(Vec<f32>, SampleSpec)> = cases
        .iter()
        .map(|(_, l, p, h, _)| (l.to_vec(), SampleSpec { params: *p, seed: 0, draw_index: 0, penalty_tokens: h.clone() }))
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
        let history = ids.iter().map(|&t| hist(t, r.random_range(0..4), r.random_bool(0.8))).collect();
        let s = SampleSpec { params, seed: 0, draw_index: 0, penalty_tokens: history };
        changed += (ranked(&penalised(&l, &s))[0] != ranked(&l)[0]) as usize;
        rows.push((l, s));
    }
    assert!(changed >= 8, "the random penalties should move the argmax in many rows, moved {changed}");
    let out = sample(&ctx, &k, vocab, &rows);
    for (i, ((l, s), o)) in rows.iter().zip(&out).enumerate() {
        let what = cases.get(i).map_or(format!("random row {i}"), |c| c.0.to_string());
        let pl = penalised(l, s);
        let (rank, lp) = (ranked(&pl), log_softmax(&pl, 0.0));
        assert_eq!(o.id as usize, rank[0], "{what}: argmax of the penalised logits");
        if let Some(c) = cases.get(i) {
            assert_eq!(o.id, c.4, "{what}: expected token");
        }
        assert!((o.logprob as f64 - lp[rank[0]]).abs() < 1e-4, "{what}: logprob {} vs {}", o.logprob, lp[rank[0]]);
        for (n, &(id, _)) in o.top.iter().take(s.params.top_logprobs as usize).enumerate() {
            assert_eq!(id as usize, rank[n], "{what}: top-{n} after penalties");
        }
    }
}
