//! Prompt log-probabilities: every prompt token after the first is scored exactly once, from
//! its own history, whatever the chunking, the sampler rows left, the prefix cache or a
//! preemption does to the request.

mod common;

use common::{assert_clean, cfg, tokens};
use kiln_scheduler::testing::{Sim, reference_output, reference_prompt_logprobs};
use kiln_scheduler::{FinishReason, Request, Scheduler, SchedulerConfig, SchedulerError};

fn scoring(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request {
        prompt_logprobs: Some(0),
        seed: id,
        ..Request::new(id, prompt, max_tokens)
    }
}

/// Runs to the end, checking each step's sampler rows, then every request's output and
/// prompt logprobs against the fake model run alone.
fn run_and_check(sim: &mut Sim, reqs: &[Request]) {
    let rows = sim.sched.config().max_sampler_rows;
    while sim.sched.has_unfinished() {
        let (step, _) = sim
            .step()
            .expect("unfinished requests but nothing scheduled");
        let used = step.batch.num_samples() + step.batch.num_scored();
        assert!(used <= rows, "a step used {used} sampler rows of {rows}");
        assert!(sim.steps < 10_000, "not finished");
    }
    let max_len = sim.sched.max_len();
    for r in reqs {
        let scored = sim.prompt_logprobs.get(&r.id).cloned().unwrap_or_default();
        match r.prompt_logprobs {
            Some(_) => assert_eq!(
                scored,
                reference_prompt_logprobs(&r.prompt),
                "request {}",
                r.id
            ),
            None => assert!(scored.is_empty(), "request {} was not asked to score", r.id),
        }
        if r.max_tokens > 0 {
            assert_eq!(
                sim.outputs[&r.id],
                reference_output(r, max_len).0,
                "request {}",
                r.id
            );
        }
    }
    assert_clean(&sim.sched);
}

#[test]
fn scored_chunks_fit_the_sampler_rows_left_by_decodes() {
    // 8 rows: six decoding requests leave two for the 150-token prompt, which is scored in
    // small chunks while they decode, then generates like the others.
    let c = SchedulerConfig {
        max_sampler_rows: 8,
        ..cfg(200, 64, 8)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    let mut reqs: Vec<Request> = (0..6)
        .map(|i| Request {
            seed: i,
            ..Request::new(i, tokens(i as u32, 20), 60)
        })
        .collect();
    reqs.push(scoring(6, tokens(6, 150), 5));
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    run_and_check(&mut sim, &reqs);
}

#[test]
fn a_scoring_request_takes_no_cached_block_it_must_score() {
    let c = cfg(100, 512, 4);
    let mut sim = Sim::new(Scheduler::new(c));
    let prompt = tokens(1, 70);
    let first = Request::new(0, prompt.clone(), 3);
    sim.sched.add_request(first.clone()).unwrap();
    sim.run_to_completion(100);
    // The same prompt again: cached for a plain request, computed for a scoring one.
    let reqs = [
        first,
        Request::new(1, prompt.clone(), 3),
        scoring(2, prompt.clone(), 3),
    ];
    for r in &reqs[1..] {
        sim.sched.add_request(r.clone()).unwrap();
    }
    run_and_check(&mut sim, &reqs);
    assert_eq!(sim.finished[&1].1, 64, "the plain request hits the cache");
    assert_eq!(
        sim.finished[&2].1, 0,
        "the scoring request computes every row"
    );
}

#[test]
fn a_preempted_scoring_request_scores_each_token_once() {
    // 12 blocks for three requests of up to 10 blocks each: preemptions mid-prompt.
    let c = SchedulerConfig {
        max_model_len: 512,
        max_sampler_rows: 6,
        ..cfg(12, 48, 3)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    let reqs = [
        scoring(0, tokens(0, 130), 20),
        Request::new(1, tokens(1, 60), 90),
        scoring(2, tokens(2, 100), 30),
    ];
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    run_and_check(&mut sim, &reqs);
    assert!(
        sim.sched.stats().num_preemptions > 0,
        "the pool forces preemptions"
    );
}

#[test]
fn max_tokens_zero_scores_the_prompt_and_generates_nothing() {
    let mut sim = Sim::new(Scheduler::new(cfg(50, 32, 4)));
    let reqs = [scoring(0, tokens(0, 45), 0), scoring(1, tokens(1, 1), 0)];
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    run_and_check(&mut sim, &reqs);
    for r in &reqs {
        assert_eq!(sim.finished[&r.id].0, FinishReason::Length);
        assert!(
            !sim.outputs.contains_key(&r.id),
            "request {} generated",
            r.id
        );
    }
}

#[test]
fn bad_prompt_logprobs_requests_are_refused() {
    let mut s = Scheduler::new(cfg(50, 32, 4));
    assert_eq!(
        s.add_request(Request::new(0, tokens(0, 5), 0)),
        Err(SchedulerError::ZeroMaxTokens { id: 0 })
    );
    let too_many = Request {
        prompt_logprobs: Some(21),
        ..Request::new(1, tokens(0, 5), 1)
    };
    assert!(matches!(
        s.add_request(too_many),
        Err(SchedulerError::InvalidSampling { id: 1, .. })
    ));
}
