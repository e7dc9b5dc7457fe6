//! Greedy argmax with log-probs, seeded reproducibility, and draws following the filtered
//! distribution.

use super::*;

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
            // A greedy row asking for no log-probs stops at the argmax: its word stays 0.
            let want = if s.params.top_logprobs == 0 {
                0.0
            } else {
                lp[rank[0]]
            };
            assert!(
                (o.logprob as f64 - want).abs() < 1e-4,
                "vocab {vocab} row {i}: logprob {} vs {want}",
                o.logprob,
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
pub(crate) fn kept_distribution(l: &[f32], p: &SamplingParams) -> Vec<f64> {
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
        assert_frequencies(name, &logits, &counts, &want, n);
    }
}

/// The draw's noise is bounded as that of a 24-bit uniform: a token whose probability is
/// negligible (e^-30 against one dominant token) is never drawn, over 4,096 draws from 65,533
/// tokens. (Noise from a uniform that rounds to exactly 1 is infinite and picks its token
/// whatever its probability: about 16 of these draws would.)
#[test]
fn negligible_tokens_are_never_drawn() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 65533;
    let mut peaked = vec![0f32; vocab];
    peaked[4321] = 30.0;
    let t1 = SamplingParams::default();
    let mut others = 0;
    for call in 0..32u32 {
        let rows: Vec<_> = (0..128)
            .map(|s| (peaked.clone(), spec(t1, 5 + s, call)))
            .collect();
        others += sample(&ctx, &k, vocab, &rows)
            .iter()
            .filter(|o| o.id != 4321)
            .count();
    }
    assert_eq!(others, 0, "draws of tokens with probability ~e^-30");
}
