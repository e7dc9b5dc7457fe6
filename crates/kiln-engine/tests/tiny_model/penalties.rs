//! Penalties and logit biases end to end: the penalty lists the runner keeps between steps,
//! written by difference, give every token the penalties of the sequence's whole history.
//! Each sampled token's processed log-probability is checked against the CPU reference
//! forward pass with the penalty formula applied to the history counted afresh, through
//! chunked prefill, preemption (lists sent again) and overlapped steps (the last token
//! counted by the sampler).

use kiln_engine::{LogprobsMode, Overlap};

use super::*;

/// The logits after the penalties of `history` (outputs from `prompt_len` on) and the biases.
fn penalised(logits: &[f32], r: &Request, history: &[u32], prompt_len: usize) -> Vec<f64> {
    let p = &r.sampling;
    let mut l: Vec<f64> = logits.iter().map(|&v| v as f64).collect();
    let mut seen = vec![false; l.len()];
    let mut count = vec![0u32; l.len()];
    for (i, &t) in history.iter().enumerate() {
        seen[t as usize] = true;
        count[t as usize] += u32::from(i >= prompt_len);
    }
    for (t, v) in l.iter_mut().enumerate() {
        if seen[t] {
            let rp = p.repetition_penalty as f64;
            *v = if *v > 0.0 { *v / rp } else { *v * rp };
        }
        if count[t] > 0 {
            *v -= (p.presence_penalty + p.frequency_penalty * count[t] as f32) as f64;
        }
    }
    for &(t, b) in &r.logit_bias {
        l[t as usize] += b as f64;
    }
    l
}

#[test]
fn penalised_tokens_follow_the_cpu_formula_over_the_whole_history() {
    let (_dir, model) = tiny(&TinyConfig::default(), 5);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
    let reqs = || {
        (0..6u64)
            .map(|id| {
                // Up to 200 prompt tokens of 300: lists of one or two pages.
                let n = [200, 150, 60, 130, 20, 90][id as usize];
                let mut r = request(id, tokens(300 + id, n, vocab), 24);
                r.sampling.repetition_penalty = [1.3, 1.0, 1.6][id as usize % 3];
                r.sampling.presence_penalty = [0.4, 0.0, 0.2][id as usize % 3];
                r.sampling.frequency_penalty = [0.3, 0.8, 0.0][id as usize % 3];
                r.sampling.logprobs_mode = LogprobsMode::Processed;
                r.sampling.top_logprobs = 1;
                if id % 2 == 1 {
                    r.logit_bias = vec![(7, 1.5), (100, -1.0)];
                }
                r
            })
            .collect::<Vec<_>>()
    };
    for family in FAMILIES {
        for overlap in [Overlap::Off, Overlap::On] {
            let ec = EngineConfig {
                overlap,
                max_model_len: Some(384),
                ..config(40, true)
            };
            let mut e = engine(&ctx, &model, on(ec, family, KvDtype::F16));
            let out = run(&mut e, reqs());
            let what = format!("kernels {family} overlap {overlap:?}");
            assert!(e.stats().num_preemptions > 0, "{what}: no preemption");
            let (mut checked, mut moved, mut worst) = (0, 0, 0f64);
            for r in reqs() {
                let got = &out[&r.id];
                assert_eq!(got.len(), 24, "{what}: request {}", r.id);
                let seq = [r.prompt.clone(), ids(got)].concat();
                let logits = cpu.forward(&seq[..seq.len() - 1]);
                let n = r.prompt.len();
                for (j, t) in got.iter().enumerate() {
                    let pos = n + j - 1;
                    let pl = penalised(&logits[pos], &r, &seq[..pos + 1], n);
                    let m = pl.iter().copied().fold(f64::MIN, f64::max);
                    let lse = m + pl.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                    let lp = pl[t.token_id as usize] - lse;
                    let what = format!("{what}: request {} token {j}", r.id);
                    assert!(lp >= m - lse - 6e-4, "{what}: not the argmax ({lp})");
                    let got_lp = t.logprob.unwrap() as f64;
                    worst = worst.max((got_lp - lp).abs());
                    assert!(
                        (got_lp - lp).abs() < 6e-4,
                        "{what}: logprob {got_lp} vs {lp}"
                    );
                    let plain = &logits[pos];
                    let top = (0..vocab).max_by(|&a, &b| plain[a].total_cmp(&plain[b]));
                    moved += usize::from(top != Some(t.token_id as usize));
                    checked += 1;
                }
            }
            assert!(
                moved * 4 > checked,
                "{what}: penalties moved {moved} of {checked}"
            );
            eprintln!(
                "{what}: {checked} tokens, {moved} moved by penalties, worst log-prob error {worst:.2e}"
            );
        }
    }
}
