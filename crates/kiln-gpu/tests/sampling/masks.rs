//! Token masks and non-finite logits left out of greedy, filtering and the draw.

use super::draws::kept_distribution;
use super::*;

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
        assert_frequencies(name, &logits, &counts, &want, n);
    }
}
