//! Speculative decoding by prompt lookup: decodes carry guesses of their next tokens from
//! their own history, and keep those the model's draws confirm. Every output and finish
//! reason must equal the fake model's run alone, one token at a time, with stop tokens,
//! `min_tokens` (no decode's rows straddling its end) and penalties, preemption, the prefix cache and sliding
//! windows in the mix; guesses must be made, and some must fail.

mod common;

use common::{assert_clean, below, cfg, tokens};
use kiln_core::SamplingParams;
use kiln_scheduler::testing::{FIRST_TOKEN, Sim, copying_token, reference_output_in_window};
use kiln_scheduler::{Request, Scheduler, SchedulerConfig, Speculation};

const LOOKUP: Speculation = Speculation {
    num_tokens: 5,
    lookup_min: 2,
    lookup_max: 4,
};

/// 40 requests whose prompts repeat phrases (so the history has matches), half sharing a
/// system prompt; some end on a token of their phrase (often inside a run of confirmed
/// guesses), some have `min_tokens`, some penalties.
fn workload() -> Vec<Request> {
    let mut next = below(0x9e37_79b9_7f4a_7c15);
    (0..40u64)
        .map(|id| {
            let mut prompt = if id % 2 == 0 {
                tokens(0, 24)
            } else {
                Vec::new()
            };
            let phrase = tokens(id as u32 + 1, 3 + next(6) as usize);
            for _ in 0..2 + next(4) {
                prompt.extend(&phrase);
                prompt.extend(tokens(id as u32 + 100, 1 + next(3) as usize));
            }
            let sampling = if id % 5 == 3 {
                SamplingParams {
                    frequency_penalty: 0.5,
                    ..SamplingParams::greedy()
                }
            } else {
                SamplingParams::greedy()
            };
            let max_tokens = 1 + next(80) as usize;
            Request {
                seed: id,
                eos_token_ids: if id % 3 == 1 {
                    vec![phrase[2]]
                } else {
                    (0..4).map(|k| FIRST_TOKEN + 3 + k * 250).collect()
                },
                min_tokens: if id % 6 == 1 { max_tokens / 2 } else { 0 },
                sampling,
                ..Request::new(id, prompt, max_tokens)
            }
        })
        .collect()
}

/// Runs `reqs` with `c` on the copying fake model; checks each output and finish against the
/// model alone and returns the simulation.
fn run(c: SchedulerConfig, reqs: &[Request], overlap: bool) -> Sim {
    let window = c.sliding_window;
    let mut sim = Sim::new(Scheduler::new(c));
    sim.runner.model = copying_token;
    sim.overlap = overlap;
    for r in reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    let mut penalised_guesses = 0;
    while let Some((step, _)) = sim.step() {
        for (s, seq) in step.batch.seqs.iter().zip(&step.seqs) {
            if s.drafts == 0 {
                continue;
            }
            let spec = s.sample.as_ref().expect("guesses are sampled");
            penalised_guesses += usize::from(spec.params.has_penalties());
            // min_tokens' ban is the same for every row of a decode: all under it or none.
            let r = &reqs[seq.id as usize];
            let (first, last) = (
                spec.draw_index as usize,
                (spec.draw_index + s.drafts) as usize,
            );
            assert!(
                first >= r.min_tokens || last < r.min_tokens,
                "request {}: rows drawing outputs {first}..={last} across min_tokens {}",
                r.id,
                r.min_tokens
            );
        }
        assert!(sim.steps < 20_000, "not finished");
    }
    if sim.sched.stats().spec_draft_tokens > 0 {
        assert!(penalised_guesses > 0, "no request with penalties guessed");
    }
    let max_len = sim.sched.max_len();
    for r in reqs {
        let (out, why) = reference_output_in_window(r, max_len, window, copying_token);
        assert_eq!(sim.outputs[&r.id], out, "request {}", r.id);
        assert_eq!(sim.finished[&r.id].0, why, "request {}", r.id);
    }
    assert_clean(&sim.sched);
    sim
}

/// `c` with guesses, and sampler rows for them: as many again as sequences, three times.
fn speculating(c: SchedulerConfig) -> SchedulerConfig {
    SchedulerConfig {
        speculation: Some(LOOKUP),
        max_sampler_rows: 4 * c.max_num_seqs,
        ..c
    }
}

#[test]
fn guesses_change_no_output_and_save_steps() {
    let reqs = workload();
    let plain = run(cfg(400, 256, 8), &reqs, false);
    let sim = run(speculating(cfg(400, 256, 8)), &reqs, false);
    let st = sim.sched.stats();
    assert!(
        st.spec_accepted_tokens > 100 && st.spec_accepted_tokens < st.spec_draft_tokens,
        "{} of {} guesses confirmed",
        st.spec_accepted_tokens,
        st.spec_draft_tokens
    );
    assert!(
        sim.steps < plain.steps,
        "{} steps with guesses, {} without",
        sim.steps,
        plain.steps
    );
    assert_eq!(plain.sched.stats().spec_draft_tokens, 0);
}

#[test]
fn guesses_hold_under_preemption_a_small_budget_and_overlap() {
    let reqs = workload();
    // 24 blocks for 8 running requests: preemptions; a budget of 24 tokens: guesses and
    // prefill chunks compete for it.
    let sim = run(speculating(cfg(24, 24, 8)), &reqs, false);
    assert!(sim.sched.stats().num_preemptions > 0);
    assert!(sim.sched.stats().spec_accepted_tokens > 0);
    // With overlap asked for, steps with guesses are not overlapped; the rest may be.
    let sim = run(speculating(cfg(400, 256, 8)), &reqs, true);
    assert!(sim.sched.stats().spec_accepted_tokens > 0);
}

#[test]
fn guesses_hold_within_a_sliding_window() {
    let c = SchedulerConfig {
        sliding_window: Some(24),
        ..speculating(cfg(200, 64, 8))
    };
    let sim = run(c, &workload(), false);
    let st = sim.sched.stats();
    assert!(st.spec_accepted_tokens > 0 && st.window_released_blocks > 0);
}

#[test]
fn a_request_waits_for_the_fate_of_its_guesses() {
    let mut s = Scheduler::new(speculating(cfg(64, 256, 2)));
    let phrase = tokens(1, 4);
    let prompt = [&phrase[..], &phrase[..], &phrase[..]].concat();
    s.add_request(Request::new(1, prompt.clone(), 20)).unwrap();
    let mut first = s.schedule().unwrap();
    assert_eq!(first.seqs[0].drafts, 0, "a prefill carries no guesses");
    s.commit(&mut first);
    let token = kiln_core::SampledToken {
        token_id: phrase[0],
        logprob: None,
        top_logprobs: Vec::new(),
        rank: None,
        hidden: None,
    };
    s.resolve(first, std::slice::from_ref(&token));
    // The history ends "p1 p2 p3 p0", which occurred last at 5: the guesses are what
    // followed it, to the end of the history.
    let mut second = s.schedule().unwrap();
    assert_eq!(second.seqs[0].drafts, 4);
    let n = second.batch.token_ids.len();
    assert_eq!(
        second.batch.token_ids[n - 4..],
        [&prompt[9..], &phrase[..1]].concat()
    );
    s.commit(&mut second);
    // Scheduled before those tokens are known: the request is left out.
    assert!(s.schedule().is_none());
    s.check_invariants().unwrap();
}
