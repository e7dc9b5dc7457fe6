//! Speculative decoding by prompt lookup against plain decoding: decodes that carry guesses
//! of their next tokens (and keep those the model's draws confirm) must give every request
//! the same tokens, log-probs, prompt scores and finish reasons, with greedy and seeded
//! sampling, stop tokens, penalties (never guessed for), prompt scoring and preemption in
//! the mix; and guesses must be made and confirmed.

use kiln_engine::{Engine, Speculation};

use super::overlap::{assert_same_outcomes, run_outcomes, workload};
use super::*;

/// The overlap test's workload, plus requests whose prompts repeat a phrase.
fn repeating(vocab: usize) -> Vec<Request> {
    let mut reqs = workload(vocab);
    for id in 20..24u64 {
        let phrase = tokens(id, 6, vocab);
        let prompt = [
            &phrase[..],
            &tokens(id + 50, 3, vocab),
            &phrase[..],
            &phrase[..],
        ]
        .concat();
        let sampling = SamplingParams {
            top_logprobs: 2,
            temperature: if id % 2 == 0 { 0.0 } else { 0.8 },
            ..SamplingParams::default()
        };
        reqs.push(Request {
            sampling,
            seed: id,
            ..Request::new(id, prompt, 40)
        });
    }
    reqs
}

#[test]
fn guesses_change_no_output() {
    let (_dir, model) = tiny(&TinyConfig::default(), 21);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    for family in FAMILIES {
        let ec = |speculation| {
            let ec = EngineConfig {
                max_num_seqs: 16,
                speculation,
                ..config(30, true)
            };
            on(ec, family, KvDtype::F16)
        };
        let mut plain = engine(&ctx, &model, ec(None));
        let want = run_outcomes(&mut plain, repeating(vocab));
        let lookup = Speculation {
            num_tokens: 4,
            lookup_min: 1,
            lookup_max: 3,
        };
        let mut guessing: Engine = engine(&ctx, &model, ec(Some(lookup)));
        let got = run_outcomes(&mut guessing, repeating(vocab));
        let stats = guessing.stats();
        assert!(
            stats.spec_accepted_tokens > 0 && stats.num_preemptions > 0,
            "kernels {family}: {} of {} guesses confirmed, {} preemptions",
            stats.spec_accepted_tokens,
            stats.spec_draft_tokens,
            stats.num_preemptions
        );
        assert_same_outcomes(&got, &want, &format!("kernels {family}"));
        eprintln!(
            "kernels {family}: {} of {} guesses confirmed; {} steps, {} without guesses",
            stats.spec_accepted_tokens,
            stats.spec_draft_tokens,
            guessing.num_steps(),
            plain.num_steps()
        );
    }
}
