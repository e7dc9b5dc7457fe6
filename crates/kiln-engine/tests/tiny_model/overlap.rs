//! Overlapped steps (the default) against steps run one after the other: each step submitted
//! while the one before it runs takes its decodes' input tokens from that step's output on
//! the GPU. Every request's tokens, finish reason and prompt scores must be the same.

use kiln_engine::{Engine, FinishReason, LogprobsMode, Overlap};

use super::*;

/// What a request produced: tokens with their log-probs, each followed by its top
/// alternatives (so a shifted normaliser shows even where the chosen token's log-prob is
/// near 0), prompt scores, and why it ended.
type Outcome = (Vec<(u32, f32)>, Vec<(u32, f32)>, Option<FinishReason>);

pub(super) fn run_outcomes(e: &mut Engine, reqs: Vec<Request>) -> BTreeMap<u64, Outcome> {
    let mut out: BTreeMap<u64, Outcome> = BTreeMap::new();
    for r in reqs {
        out.insert(r.id, Default::default());
        e.add_request(r).expect("add_request");
    }
    while e.has_unfinished() {
        for u in pollster::block_on(e.step()).expect("step") {
            let o = out.get_mut(&u.id).unwrap();
            if let Some(t) = u.token {
                o.0.push((t.token_id, t.logprob.unwrap_or(0.0)));
                o.0.extend(&t.top_logprobs);
            }
            let scored = u.prompt_logprobs.iter();
            o.1.extend(scored.map(|t| (t.token_id, t.logprob.unwrap())));
            if u.finished.is_some() {
                o.2 = u.finished;
            }
        }
    }
    out
}

/// Every request's tokens, scored prompt tokens and finish equal, and log-probs within 1e-4.
pub(super) fn assert_same_outcomes(
    got: &BTreeMap<u64, Outcome>,
    want: &BTreeMap<u64, Outcome>,
    what: &str,
) {
    for (id, w) in want {
        let g = &got[id];
        let what = format!("{what} request {id}");
        let ids = |v: &[(u32, f32)]| v.iter().map(|t| t.0).collect::<Vec<_>>();
        assert_eq!(ids(&g.0), ids(&w.0), "{what}: tokens");
        assert_eq!(ids(&g.1), ids(&w.1), "{what}: scored tokens");
        assert_eq!(g.2, w.2, "{what}: finish");
        for (a, b) in g.0.iter().chain(&g.1).zip(w.0.iter().chain(&w.1)) {
            assert!(
                (a.1 - b.1).abs() < 1e-4,
                "{what}: log-prob {} vs {}",
                a.1,
                b.1
            );
        }
    }
}

/// 12 requests, half sharing a 32-token prefix, in a pool too small for all of them
/// (preemption): greedy and seeded sampling, stop tokens, penalties (the sampler counts the
/// pending token on the GPU), prompt scoring and a score-only request.
pub(super) fn workload(vocab: usize) -> Vec<Request> {
    let shared = tokens(900, 32, vocab);
    (0..12u64)
        .map(|id| {
            let own = tokens(910 + id, 5 + (id as usize * 7) % 40, vocab);
            let prompt = if id % 2 == 0 {
                [&shared[..], &own[..]].concat()
            } else {
                own
            };
            let mut sampling = SamplingParams {
                top_logprobs: 2,
                ..SamplingParams::greedy()
            };
            if id % 3 == 1 {
                sampling.temperature = 0.9;
                sampling.top_p = 0.9;
            }
            if id % 4 == 3 {
                // Log-probs of the penalised distribution, so a missed count shows.
                sampling.presence_penalty = 0.7;
                sampling.repetition_penalty = 1.3;
                sampling.logprobs_mode = LogprobsMode::Processed;
            }
            Request {
                sampling,
                seed: id,
                eos_token_ids: vec![3, 17, 40],
                prompt_logprobs: (id % 5 == 2).then_some(2),
                ..Request::new(id, prompt, if id == 7 { 0 } else { 12 + id as usize * 3 })
            }
        })
        .map(|r| Request {
            prompt_logprobs: if r.max_tokens == 0 {
                Some(1)
            } else {
                r.prompt_logprobs
            },
            ..r
        })
        .collect()
}

#[test]
fn overlapped_steps_give_the_same_outputs() {
    let (_dir, model) = tiny(&TinyConfig::default(), 21);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    for family in FAMILIES {
        let ec = |overlap| {
            let ec = EngineConfig {
                overlap: if overlap { Overlap::On } else { Overlap::Off },
                ..config(20, true)
            };
            on(ec, family, KvDtype::F16)
        };
        let mut plain = engine(&ctx, &model, ec(false));
        let want = run_outcomes(&mut plain, workload(vocab));
        assert_eq!(plain.num_overlapped_steps(), 0);
        let mut overlapped = engine(&ctx, &model, ec(true));
        let got = run_outcomes(&mut overlapped, workload(vocab));
        let stats = overlapped.stats();
        assert!(stats.num_preemptions > 0, "kernels {family}: no preemption");
        let n = overlapped.num_overlapped_steps();
        assert!(
            n * 2 > overlapped.num_steps(),
            "kernels {family}: {n} of {} steps overlapped",
            overlapped.num_steps()
        );
        let stops = want.values().filter(|o| o.2 == Some(FinishReason::Stop));
        assert!(stops.count() > 0, "no request stopped on a token");
        assert_same_outcomes(&got, &want, &format!("kernels {family}"));
        eprintln!(
            "kernels {family}: {n} of {} steps overlapped, {} without overlap",
            overlapped.num_steps(),
            plain.num_steps()
        );
    }
}
