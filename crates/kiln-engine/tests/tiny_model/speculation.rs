//! Speculative decoding by prompt lookup against plain decoding: decodes that carry guesses
//! of their next tokens (and keep those the model's draws confirm) must give every request
//! the same tokens, log-probs, prompt scores and finish reasons, with greedy and seeded
//! sampling, stop tokens, penalties (each row counting the guesses before it), `min_tokens`,
//! prompt scoring and preemption in the mix; and guesses must be made and confirmed, for
//! requests with penalties too.

use kiln_engine::{Engine, LogprobsMode, Speculation};

use super::overlap::{assert_same_outcomes, run_outcomes, workload};
use super::*;

/// Requests whose prompts repeat a phrase, from id `first`: greedy and seeded, then the
/// same with penalties (log-probs of the penalised distribution, so a missed count of a
/// guess shows), with penalties and raw log-probs (not guessed for), and with `min_tokens`.
fn repeating(first: u64, vocab: usize) -> Vec<Request> {
    (first..first + 7)
        .map(|id| {
            let phrase = tokens(id, 6, vocab);
            let prompt = [
                &phrase[..],
                &tokens(id + 50, 3, vocab),
                &phrase[..],
                &phrase[..],
            ]
            .concat();
            let k = id - first;
            let mut sampling = SamplingParams {
                top_logprobs: 2,
                temperature: if k.is_multiple_of(2) { 0.0 } else { 0.8 },
                ..SamplingParams::default()
            };
            if (2..5).contains(&k) {
                // Qwen2.5's default repetition penalty, and a frequency penalty small enough
                // that the model still repeats runs of tokens (so guesses are confirmed, also
                // after other confirmed guesses, whose counts then move the logits).
                sampling.repetition_penalty = 1.05;
                sampling.frequency_penalty = if k == 3 { 0.2 } else { 0.05 };
                sampling.logprobs_mode = if k == 4 {
                    LogprobsMode::Raw
                } else {
                    LogprobsMode::Processed
                };
            }
            Request {
                sampling,
                seed: id,
                eos_token_ids: vec![3, 17, 40],
                min_tokens: if k == 5 { 20 } else { 0 },
                ..Request::new(id, prompt, 40)
            }
        })
        .collect()
}

/// The overlap test's workload, plus requests whose prompts repeat a phrase.
fn mixed(vocab: usize) -> Vec<Request> {
    [workload(vocab), repeating(20, vocab)].concat()
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
        let want = run_outcomes(&mut plain, mixed(vocab));
        let lookup = Speculation {
            num_tokens: 4,
            lookup_min: 1,
            lookup_max: 3,
        };
        let mut guessing: Engine = engine(&ctx, &model, ec(Some(lookup)));
        let got = run_outcomes(&mut guessing, mixed(vocab));
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

/// Requests with penalties alone: their guesses are made and confirmed, and change nothing.
#[test]
fn penalised_guesses_change_no_output() {
    let (_dir, model) = tiny(&TinyConfig::default(), 21);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let penalised = || -> Vec<Request> {
        let reqs = repeating(30, vocab).into_iter().skip(2).take(2);
        (0..3)
            .flat_map(|n| {
                reqs.clone().map(move |r| Request {
                    id: r.id + 10 * n,
                    seed: r.seed + n,
                    ..r
                })
            })
            .collect()
    };
    for family in FAMILIES {
        let ec = |speculation| {
            on(
                EngineConfig {
                    speculation,
                    ..config(64, true)
                },
                family,
                KvDtype::F16,
            )
        };
        let want = run_outcomes(&mut engine(&ctx, &model, ec(None)), penalised());
        let lookup = Speculation {
            lookup_min: 1,
            ..Speculation::prompt_lookup(4)
        };
        let mut guessing = engine(&ctx, &model, ec(Some(lookup)));
        let got = run_outcomes(&mut guessing, penalised());
        let stats = guessing.stats();
        assert!(
            stats.spec_accepted_tokens > 0,
            "kernels {family}: {} of {} guesses confirmed",
            stats.spec_accepted_tokens,
            stats.spec_draft_tokens
        );
        assert_same_outcomes(&got, &want, &format!("kernels {family}, penalties"));
        eprintln!(
            "kernels {family}, penalties: {} of {} guesses confirmed",
            stats.spec_accepted_tokens, stats.spec_draft_tokens
        );
    }
}
