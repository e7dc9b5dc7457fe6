//! Output tokens a row's penalty list lacks (`SampleUniform::unlisted`): an input taken from
//! the previous step's output, and the guesses before a speculative row. The kernel reads
//! them from the step's input tokens and must penalise as if the list counted them.

use super::*;

/// `list` with one more output occurrence of `token` (seen from then on).
fn count_output(list: &mut Vec<PenaltyToken>, token: u32) {
    match list.iter_mut().find(|p| p.token_id == token) {
        Some(p) => {
            p.output_count += 1;
            p.seen = true;
        }
        None => list.push(PenaltyToken {
            token_id: token,
            output_count: 1,
            seen: true,
            bias: 0.0,
        }),
    }
}

/// The same id, chosen log-prob (within 1e-6) and top-5 as `want`.
fn assert_same_row(got: &Out, want: &Out, what: &str) {
    assert_eq!(got.id, want.id, "{what}: id");
    assert!(
        (got.logprob - want.logprob).abs() < 1e-6,
        "{what}: log-prob {} vs {}",
        got.logprob,
        want.logprob
    );
    assert_eq!(got.top[..5], want.top[..5], "{what}: top-5");
}

/// A row whose last output token is pending (`SampleUniform::unlisted`: the host's penalty
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
            count_output(&mut full, pending);
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
            (uniforms[1].unlisted, uniforms[1].unlisted_count) = (2, 1);
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
            assert_same_row(&out[1], &out[0], &what);
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
}

/// Rows lacking up to `MAX_UNLISTED` output tokens (repeats among them; listed before,
/// listed only as seen in the prompt or for a bias, or absent) sample as the same rows with
/// the tokens counted in their lists: ids, chosen and top-5 log-probs in both modes, greedy
/// and seeded, in one dispatch with rows of other lengths.
#[test]
fn unlisted_output_tokens_are_penalised_as_if_listed() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let vocab = 1031;
    let mut r = rng(47);
    let mut checked = 0;
    for mode in [LogprobsMode::Processed, LogprobsMode::Raw] {
        for temperature in [0.0, 0.9] {
            let params = SamplingParams {
                temperature,
                repetition_penalty: 1.3,
                presence_penalty: 0.4,
                frequency_penalty: 0.25,
                top_logprobs: 5,
                logprobs_mode: mode,
                ..SamplingParams::default()
            };
            let (mut specs, mut rows, mut inputs) = (Vec::new(), Vec::new(), Vec::new());
            let mut unlisted = Vec::new();
            for n in [1, 2, 5, 9, ops::MAX_UNLISTED] {
                // Tokens from a small set, so some repeat and some are listed already.
                let extra: Vec<u32> = (0..n).map(|_| r.random_range(20..32)).collect();
                let mut known: Vec<PenaltyToken> = (20..26)
                    .map(|t| PenaltyToken {
                        token_id: t,
                        output_count: r.random_range(0..3),
                        seen: t != 25,
                        bias: if t % 2 == 0 { 0.3 } else { 0.0 },
                    })
                    .chain((600..640).map(|t| PenaltyToken {
                        token_id: t,
                        output_count: 1,
                        seen: true,
                        bias: 0.0,
                    }))
                    .collect();
                let mut full = known.clone();
                for &t in &extra {
                    count_output(&mut full, t);
                }
                known.shuffle(&mut r);
                full.shuffle(&mut r);
                // The unlisted tokens lead, so the penalties decide the choice.
                let mut logits = randn(&mut r, vocab, 1.0);
                for l in &mut logits[20..32] {
                    *l = 2.0 + r.random::<f32>();
                }
                let draw_index = r.random_range(0..50);
                for list in [full, known] {
                    specs.push(SampleSpec {
                        draw_index,
                        ..with_list(params, 77, list)
                    });
                    rows.push(logits.clone());
                }
                unlisted.push((inputs.len() as u32, n as u32));
                inputs.extend(extra);
            }
            let refs: Vec<&SampleSpec> = specs.iter().collect();
            let (store, pool_base, tables) = penalty_store(&refs);
            let mut uniforms: Vec<SampleUniform> = (specs.iter().zip(tables))
                .map(|(s, t)| SampleUniform::new(s, t))
                .collect();
            for (pair, &(start, n)) in uniforms.chunks_mut(2).zip(&unlisted) {
                (pair[1].unlisted, pair[1].unlisted_count) = (start, n);
            }
            let penalties = (store, pool_base);
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
            for (pair, &(_, n)) in out.chunks(2).zip(&unlisted) {
                let what = format!("{mode:?}, temperature {temperature}, {n} unlisted");
                assert_same_row(&pair[1], &pair[0], &what);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 20);
}
