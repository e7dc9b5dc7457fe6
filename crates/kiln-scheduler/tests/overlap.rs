//! Overlapped steps: each step is scheduled (and run by the fake runner) while the step before
//! it is committed but its tokens are not yet resolved, as the engine runs them. Decodes then
//! take their input token from the previous step's output (`StepBatch::prev_tokens`). Every
//! output, finish reason and scored prompt token must equal the fake model's run alone, with
//! preemption, the prefix cache, the CPU tier, sliding windows, prompt scoring, penalties,
//! stop tokens and aborts in the mix.

mod common;

use common::{assert_clean, below, cfg, tokens};
use kiln_core::SamplingParams;
use kiln_scheduler::testing::{
    FIRST_TOKEN, FakeRunner, Sim, next_token, reference_output_in_window, reference_prompt_logprobs,
};
use kiln_scheduler::{Request, Scheduler, SchedulerConfig};

/// 48 requests: half share a 40-token system prompt, some stop on EOS (a token the fake
/// model draws about once in 200), some score their prompt, some have penalties.
fn workload() -> Vec<Request> {
    let mut next = below(0x2545_f491_4f6c_dd1du64);
    (0..48u64)
        .map(|id| {
            let mut prompt = if id % 2 == 0 {
                tokens(0, 40)
            } else {
                Vec::new()
            };
            prompt.extend(tokens(id as u32 + 1, 5 + next(120) as usize));
            let sampling = if id % 5 == 3 {
                SamplingParams {
                    presence_penalty: 0.5,
                    ..SamplingParams::greedy()
                }
            } else {
                SamplingParams::greedy()
            };
            Request {
                seed: id,
                eos_token_ids: (0..5).map(|k| FIRST_TOKEN + 7 + k * 200).collect(),
                prompt_logprobs: (id % 7 == 2).then_some(0),
                sampling,
                ..Request::new(id, prompt, next(60) as usize + usize::from(id % 7 != 2))
            }
        })
        .collect()
}

/// Runs the workload with overlapped steps and checks everything against the fake model
/// alone; returns the simulation and how many inputs came from the previous step's output.
fn run_overlapped(c: SchedulerConfig, reqs: &[Request]) -> (Sim, usize) {
    let window = c.sliding_window;
    let mut sim = Sim::new(Scheduler::new(c));
    sim.overlap = true;
    for r in reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    let (mut from_previous, mut penalised_pending) = (0, 0);
    while let Some((step, _)) = sim.step() {
        let b = &step.batch;
        from_previous += b.prev_tokens.len();
        for s in &b.seqs {
            let Some(spec) = &s.sample else { continue };
            // The pending token is left to the sampler: the fake runner checks that the list
            // it holds counts only the known tokens.
            let last = s.query_start + s.query_len - 1;
            let pending = b.prev_tokens.iter().any(|p| p.index == last);
            if spec.params.has_penalties() {
                penalised_pending += usize::from(pending);
            }
        }
        assert!(sim.steps < 20_000, "not finished");
    }
    let max_len = sim.sched.max_len();
    for r in reqs {
        if r.max_tokens > 0 {
            let (out, why) = reference_output_in_window(r, max_len, window, next_token);
            assert_eq!(sim.outputs[&r.id], out, "request {}", r.id);
            assert_eq!(sim.finished[&r.id].0, why, "request {}", r.id);
        }
        if r.prompt_logprobs.is_some() {
            assert_eq!(
                sim.prompt_logprobs[&r.id],
                reference_prompt_logprobs(&r.prompt),
                "request {}",
                r.id
            );
        }
    }
    assert_clean(&sim.sched);
    if reqs.iter().any(|r| r.sampling.has_penalties()) {
        assert!(
            penalised_pending > 0,
            "no request with penalties had a pending token"
        );
    }
    (sim, from_previous)
}

#[test]
fn overlapped_steps_match_running_alone_with_preemption() {
    // 60 blocks for 48 requests of up to 14 blocks each, chunks of 96 tokens.
    let c = SchedulerConfig {
        max_model_len: 1024,
        max_sampler_rows: 12,
        ..cfg(60, 96, 16)
    };
    let (sim, from_previous) = run_overlapped(c, &workload());
    let stats = sim.sched.stats();
    assert!(stats.num_preemptions > 0, "the pool never ran out");
    assert!(
        from_previous > 500,
        "{from_previous} inputs from the previous step"
    );
}

#[test]
fn overlapped_steps_match_running_alone_with_the_cpu_tier() {
    let c = SchedulerConfig {
        num_cpu_blocks: 200,
        ..cfg(48, 256, 8)
    };
    let (sim, from_previous) = run_overlapped(c, &workload());
    let stats = sim.sched.stats();
    assert!(
        stats.cpu_blocks_restored > 0,
        "nothing came back from the CPU tier"
    );
    assert!(
        from_previous > 500,
        "{from_previous} inputs from the previous step"
    );
}

#[test]
fn overlapped_steps_match_running_alone_with_a_sliding_window() {
    let c = SchedulerConfig {
        sliding_window: Some(40),
        ..cfg(40, 48, 8)
    };
    // The fake model's prompt scores see the whole prompt, not a window: no scoring here.
    let reqs: Vec<Request> = (workload().into_iter())
        .map(|r| Request {
            prompt_logprobs: None,
            max_tokens: r.max_tokens.max(1),
            ..r
        })
        .collect();
    let (sim, _) = run_overlapped(c, &reqs);
    assert!(sim.sched.stats().window_released_blocks > 0);
}

#[test]
fn requests_aborted_while_their_step_runs_leave_nothing_behind() {
    let reqs = workload();
    let mut sim = Sim::new(Scheduler::new(cfg(80, 128, 12)));
    sim.overlap = true;
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    let mut aborted = Vec::new();
    while sim.step().is_some() {
        // Every 5th step, abort the oldest running request: it is in the step in flight.
        if sim.steps.is_multiple_of(5)
            && let Some(&id) = sim.sched.running_ids().first()
        {
            assert!(sim.sched.in_flight());
            sim.sched.abort(id).expect("a running request");
            aborted.push(id);
        }
        assert!(sim.steps < 20_000, "not finished");
    }
    assert!(aborted.len() > 5);
    let max_len = sim.sched.max_len();
    for r in reqs
        .iter()
        .filter(|r| !aborted.contains(&r.id) && r.max_tokens > 0)
    {
        let (out, why) = reference_output_in_window(r, max_len, None, next_token);
        assert_eq!(sim.outputs[&r.id], out, "request {}", r.id);
        assert_eq!(sim.finished[&r.id].0, why, "request {}", r.id);
    }
    assert_clean(&sim.sched);
}

#[test]
fn a_failed_step_and_the_step_scheduled_after_it_fail_alone() {
    let reqs = workload();
    let c = cfg(80, 128, 12);
    let mut sched = Scheduler::new(c.clone());
    let mut runner = FakeRunner::new(c.num_gpu_blocks, 0, None);
    for r in &reqs {
        sched.add_request(r.clone()).unwrap();
    }
    for _ in 0..8 {
        let step = sched.schedule().unwrap();
        let out = runner.execute(&step.batch);
        sched.update(step, &out);
    }
    // The committed step fails while the next one, scheduled from it, is in flight.
    let mut current = sched.schedule().unwrap();
    runner.execute(&current.batch);
    sched.commit(&mut current);
    let next = sched.schedule().unwrap();
    assert!(!next.batch.prev_tokens.is_empty());
    let mut failed = sched.fail_step(next);
    failed.extend(sched.fail_step(current));
    assert!(!sched.in_flight());
    sched
        .check_invariants()
        .expect("invariants after the failures");
    let mut sim = Sim::new(sched);
    sim.runner = runner;
    sim.overlap = true;
    sim.run_to_completion(20_000);
    let max_len = sim.sched.max_len();
    let survivors = reqs.iter().filter(|r| !failed.contains(&r.id));
    for r in survivors.filter(|r| r.max_tokens > 0) {
        let (out, why) = reference_output_in_window(r, max_len, None, next_token);
        assert_eq!(
            sim.outputs[&r.id],
            out[out.len() - sim.outputs[&r.id].len()..]
        );
        assert_eq!(sim.finished[&r.id].0, why, "request {}", r.id);
    }
    assert_clean(&sim.sched);
}
