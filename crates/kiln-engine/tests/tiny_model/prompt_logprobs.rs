//! Prompt log-probabilities through the engine: a 45-token prompt scored while another
//! request decodes, four sampler rows per step (so the prompt is scored a few rows at a
//! time, its chunks cut to the rows left), against the CPU reference's log-softmax.

use super::*;

/// The CPU reference's log-softmax of one row of logits.
fn log_softmax(row: &[f32]) -> Vec<f32> {
    let top = row.iter().fold(f32::MIN, |m, &v| m.max(v));
    let log_z = top + row.iter().map(|v| (v - top).exp()).sum::<f32>().ln();
    row.iter().map(|v| v - log_z).collect()
}

/// Each scored token's log-prob within 5e-3 of the reference's (the sampled log-probs' bound
/// in `serving.rs`), and so are the three alternatives' (by value, so that near-ties may
/// swap ids); its rank is the reference's (up to near-ties); the generated tokens and the other request's are those of each run alone.
#[test]
fn prompt_logprobs_match_the_cpu_reference() {
    let (_dir, model) = tiny(&TinyConfig::default(), 7);
    let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let prompt = tokens(11, 45, vocab);
    let want: Vec<Vec<f32>> = cpu
        .forward(&prompt)
        .iter()
        .map(|r| log_softmax(r))
        .collect();
    let scoring = Request {
        prompt_logprobs: Some(3),
        ..request(0, prompt.clone(), 4)
    };
    let other = request(1, tokens(12, 20, vocab), 30);
    for family in FAMILIES {
        let ec = EngineConfig {
            max_num_seqs: 4,
            ..config(32, true)
        };
        let ec = on(ec, family, KvDtype::F16);
        let mut e = engine(&ctx, &model, ec.clone());
        for r in [&scoring, &other] {
            e.add_request(r.clone()).unwrap();
        }
        let (mut scored, mut out) = (Vec::new(), BTreeMap::<u64, Vec<u32>>::new());
        let mut steps = 0;
        while e.has_unfinished() {
            for u in pollster::block_on(e.step()).unwrap() {
                scored.extend(u.prompt_logprobs);
                out.entry(u.id)
                    .or_default()
                    .extend(u.token.map(|t| t.token_id));
            }
            steps += 1;
        }
        assert!(
            steps >= 11,
            "kernels {family}: 44 rows at 4 a step took {steps} steps"
        );
        assert_eq!(ids(&scored), prompt[1..], "kernels {family}: scored tokens");
        let mut worst = 0f32;
        for (p, t) in scored.iter().enumerate() {
            let w = &want[p];
            let what = format!("kernels {family} prompt token {}", p + 1);
            let got = t.logprob.unwrap();
            worst = worst.max((got - w[t.token_id as usize]).abs());
            // The rank, unless a near-tie with the token could reorder it.
            let v = w[t.token_id as usize];
            let (above, near) = (w.iter()).fold((0, 0), |(a, n), &x| {
                (
                    a + u32::from(x > v + 1e-3),
                    n + u32::from((x - v).abs() <= 1e-3),
                )
            });
            let rank = t.rank.unwrap();
            assert!(
                (above + 1..=above + near).contains(&rank),
                "{what}: rank {rank}, reference {} to {}",
                above + 1,
                above + near
            );
            let mut best: Vec<f32> = w.clone();
            best.sort_by(|a, b| b.total_cmp(a));
            assert_eq!(t.top_logprobs.len(), 3, "{what}");
            for (k, &(id, v)) in t.top_logprobs.iter().enumerate() {
                worst = worst
                    .max((v - best[k]).abs())
                    .max((v - w[id as usize]).abs());
            }
            assert!(worst <= 5e-3, "{what}: {t:?} vs {:?}", &best[..3]);
        }
        eprintln!("kernels {family}: 44 prompt log-probs within {worst:.1e}");
        let mut alone = engine(&ctx, &model, ec);
        let plain = Request {
            prompt_logprobs: None,
            ..scoring.clone()
        };
        let want_out = common::run_all(&mut alone, vec![plain, other.clone()]);
        assert_eq!(out, want_out, "kernels {family}: generated tokens");
    }
}
