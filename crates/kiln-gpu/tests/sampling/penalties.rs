//! Repetition, presence and frequency penalties and logit biases against the CPU formula.

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
