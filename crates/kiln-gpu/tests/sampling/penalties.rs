//! Repetition, presence and frequency penalties and logit biases against the CPU formula,
//! and an output token the penalty list lacks (taken from the previous step's output).

use super::*;

/// The penalised logits the kernel should see: repetition on seen tokens, then presence once
/// and frequency per occurrence for tokens in the output, then the bias.
pub(super) fn penalised(l: &[f32], s: &SampleSpec) -> Vec<f32> {
    let mut l = l.to_vec();
    let p = &s.params;
    for t in &penalty_list(s) {
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
        *v += t.bias;
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
        bias: 0.0,
    };
    let biased = |id, bias| PenaltyToken {
        token_id: id,
        output_count: 0,
        seen: false,
        bias,
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
        ("a bias lifts a token", &pos, g, vec![biased(9, 0.6)], 9),
        ("a bias too small", &pos, g, vec![biased(9, 0.4)], 7),
        (
            "a negative bias sinks the leader",
            &pos,
            g,
            vec![biased(7, -0.6)],
            9,
        ),
        ("a bias of -100 bans", &neg, g, vec![biased(7, -100.0)], 9),
        (
            "the bias comes after the penalties", // 3/1.5 + 0.6 = 2.6 vs 2.5
            &pos,
            SamplingParams {
                repetition_penalty: 1.5,
                ..g
            },
            vec![PenaltyToken {
                bias: 0.6,
                ..hist(7, 0, true)
            }],
            7,
        ),
    ];
    let mut rows: Vec<(Vec<f32>, SampleSpec)> = cases
        .iter()
        .map(|(_, l, p, h, _)| (l.to_vec(), with_list(*p, 0, h.clone())))
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
            .map(|&t| PenaltyToken {
                bias: if r.random_bool(0.3) {
                    r.random_range(-2.0..2.0)
                } else {
                    0.0
                },
                ..hist(t, r.random_range(0..4), r.random_bool(0.8))
            })
            .collect();
        let s = with_list(params, 0, history);
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
        // A greedy row asking for no log-probs stops at the argmax: its word stays 0.
        let want = if s.params.top_logprobs == 0 {
            0.0
        } else {
            lp[rank[0]]
        };
        assert!(
            (o.logprob as f64 - want).abs() < 1e-4,
            "{what}: logprob {} vs {want}",
            o.logprob,
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

/// A row whose last output token is pending (`SampleUniform::pending`: the host's penalty
/// list lacks it, the kernel reads it from the step's inputs) samples as the same row with
/// the token counted in its list: ids, chosen and top-5 log-probs in both modes, with the
/// token listed before (one more occurrence), listed only as seen in the prompt, or absent.
#[test]
fn a_pending_output_token_is_penalised_as_if_listed() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 777;
    let mut r = rng(23);
    let hist = |token_id, output_count, seen| PenaltyToken {
        token_id,
        output_count,
        seen,
        bias: 0.0,
    };
    let mut checked = 0;
    for mode in [LogprobsMode::Processed, LogprobsMode::Raw] {
        for case in 0..4u32 {
            let params = SamplingParams {
                repetition_penalty: 1.4,
                presence_penalty: 0.6,
                frequency_penalty: 0.35,
                top_logprobs: 5,
                logprobs_mode: mode,
                ..SamplingParams::greedy()
            };
            let mut logits = randn(&mut r, vocab, 1.0);
            let pending = 400 + case;
            // The pending token leads, and penalised it falls behind token 3.
            (logits[pending as usize], logits[3]) = (3.0, 2.2);
            let mut known = vec![hist(11, 2, true), hist(3, 0, true), hist(600, 1, true)];
            match case {
                0 => known.push(hist(pending, 2, true)),
                1 => known.push(hist(pending, 0, true)),
                // Listed for its bias alone (a request's logit_bias), not yet as history.
                2 => known.push(PenaltyToken {
                    bias: -0.2,
                    ..hist(pending, 0, false)
                }),
                _ => {}
            }
            known.sort_by_key(|p| p.token_id);
            let mut full = known.clone();
            match full.iter_mut().find(|p| p.token_id == pending) {
                Some(p) => {
                    p.output_count += 1;
                    p.seen = true;
                }
                None => full.push(hist(pending, 1, true)),
            }
            full.sort_by_key(|p| p.token_id);
            let listed = SampleSpec {
                draw_index: 4,
                ..with_list(params, 0, full)
            };
            let lacking = SampleSpec {
                draw_index: 4,
                ..with_list(params, 0, known)
            };
            let (store, pool_base, tables) = penalty_store(&[&listed, &lacking]);
            let uniforms: Vec<SampleUniform> = [&listed, &lacking]
                .iter()
                .zip(tables)
                .map(|(s, t)| SampleUniform::new(s, t))
                .collect();
            let mut uniforms = uniforms;
            let penalties = (store, pool_base);
            // The step's inputs: the pending token at index 2.
            uniforms[1].pending = 2;
            let inputs = [5, 9, pending];
            let rows = [logits.clone(), logits.clone()];
            let out = dispatch(
                &ctx,
                &k,
                vocab,
                &rows,
                &uniforms,
                penalties,
                vec![],
                &inputs,
            );
            let what = format!("{mode:?} case {case}");
            assert_eq!(out[0].id, 3, "{what}: the penalty should move the choice");
            assert_eq!(out[1].id, out[0].id, "{what}: id");
            assert!(
                (out[1].logprob - out[0].logprob).abs() < 1e-6,
                "{what}: log-prob {} vs {}",
                out[1].logprob,
                out[0].logprob
            );
            assert_eq!(out[1].top[..5], out[0].top[..5], "{what}: top-5");
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
}
