//! Raw log-probs (before penalties and temperature) and scored prompt rows.

use super::*;

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
                    bias: 0.0,
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
            (l, with_list(params, i as u64, history))
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
        penalised_picks += penalty_list(s).iter().any(|p| p.token_id == o.id) as usize;
    }
    assert!(
        penalised_picks > 0,
        "some chosen tokens should be penalised ones, to test their raw value"
    );
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
        let out = dispatch(
            &ctx,
            &k,
            vocab,
            &rows,
            &uniforms,
            (Vec::new(), 0),
            Vec::new(),
            &[],
        );
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
