//! Failed steps and capacities as admission rules: after any runner failure the scheduler's
//! state stays consistent and every other request still produces exactly what it produces
//! alone; a step never carries more penalty entries than the runner holds.

mod common;

use std::collections::HashSet;

use common::{assert_clean, assert_outputs_alone, cfg, tokens};
use kiln_core::{PENALTY_PAGE, SamplingParams};
use kiln_scheduler::testing::{Sim, reference_output};
use kiln_scheduler::{Request, Scheduler, SchedulerConfig, SchedulerError};

fn req(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request {
        ignore_eos: true,
        seed: id,
        ..Request::new(id, prompt, max_tokens)
    }
}

/// Runs 64 requests (12 at a time) through a pool small enough to preempt (with a CPU tier, so failed steps
/// carry block copies), failing steps `every`, `2 * every` and `3 * every` without running them: the fake runner
/// then never performs that step's copies or writes, so any stale prefix-cache entry or block
/// left behind makes a later read panic or an output differ.
fn run_with_failures(every: usize, num_cpu_blocks: usize) -> (usize, usize) {
    let c = SchedulerConfig {
        max_model_len: 1024,
        num_cpu_blocks,
        ..cfg(90, 256, 12)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    let mut reqs = Vec::new();
    for i in 0..64u64 {
        // Shared 40-token prefixes in groups of four, so the prefix cache and the tier are used.
        let mut prompt = tokens(i as u32 / 4, 40);
        prompt.extend(tokens(1000 + i as u32, 5 + (i as usize * 13) % 90));
        let r = req(i, prompt, 20 + (i as usize * 37) % 100);
        sim.sched.add_request(r.clone()).unwrap();
        reqs.push(r);
    }
    let mut failed = HashSet::new();
    let mut steps = 0;
    let mut failed_steps = 0;
    while sim.sched.has_unfinished() {
        steps += 1;
        assert!(steps < 10_000, "not finished");
        if steps % every == 0 && steps <= 3 * every {
            let step = sim.sched.schedule().expect("work left");
            let ids = sim.sched.fail_step(step.clone());
            assert_eq!(ids, step.seqs.iter().map(|s| s.id).collect::<Vec<_>>());
            assert!(!sim.sched.in_flight());
            for id in ids {
                assert!(sim.sched.blocks_of(id).is_none());
                failed.insert(id);
            }
            failed_steps += 1;
            sim.sched
                .check_invariants()
                .expect("invariants after a failed step");
        } else {
            sim.step().expect("work left");
        }
    }
    assert!(!failed.is_empty());
    for r in &reqs {
        if failed.contains(&r.id) {
            assert!(
                !sim.finished.contains_key(&r.id),
                "request {} failed and finished",
                r.id
            );
        } else {
            let (want, _) = reference_output(r, 1024);
            assert_eq!(sim.outputs[&r.id], want, "request {}", r.id);
        }
    }
    assert_clean(&sim.sched);
    let s = sim.sched.stats();
    assert_eq!(s.num_failed_steps, failed_steps as u64);
    assert_eq!(s.num_failed_requests, failed.len() as u64);
    assert!(s.num_preemptions > 0, "{s:?}");
    (failed.len(), s.cpu_blocks_restored as usize)
}

#[test]
fn failed_steps_leave_the_scheduler_consistent_and_others_unchanged() {
    for every in [9, 31, 57] {
        let (failed, _) = run_with_failures(every, 0);
        let (failed_tier, restored) = run_with_failures(every, 32);
        eprintln!(
            "every {every}: {failed} failed; with tier {failed_tier} failed, {restored} restored"
        );
    }
}

#[test]
fn a_failed_first_step_can_be_followed_by_the_same_prompt() {
    // The prompt's blocks were never computed: a new request with the same prompt must not
    // find them in the prefix cache.
    let mut sim = Sim::new(Scheduler::new(cfg(16, 2048, 4)));
    let prompt = tokens(1, 40);
    sim.sched.add_request(req(1, prompt.clone(), 3)).unwrap();
    let step = sim.sched.schedule().unwrap();
    assert_eq!(sim.sched.fail_step(step), vec![1]);
    sim.sched.add_request(req(2, prompt.clone(), 3)).unwrap();
    sim.run_to_completion(100);
    assert_eq!(
        sim.finished[&2].1, 0,
        "nothing may be cached from the failed step"
    );
    assert_eq!(
        sim.outputs[&2],
        reference_output(&req(2, prompt, 3), 1024).0
    );
    assert_clean(&sim.sched);
}

fn penalized(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request {
        sampling: SamplingParams {
            presence_penalty: 0.5,
            ..SamplingParams::greedy()
        },
        ..req(id, prompt, max_tokens)
    }
}

#[test]
fn the_penalty_pool_is_an_admission_rule() {
    // Two pages: 256 entries.
    let c = SchedulerConfig {
        max_penalty_entries: 2 * PENALTY_PAGE + 5,
        ..cfg(64, 512, 16)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    // Could reach 300 entries: refused up front, naming the pool.
    let e = sim
        .sched
        .add_request(penalized(1, tokens(1, 260), 40))
        .unwrap_err();
    assert_eq!(
        e,
        SchedulerError::TooManyPenaltyEntries {
            id: 1,
            needed: 300,
            limit: 256
        }
    );
    assert!(e.to_string().contains("256"), "{e}");
    // Without penalties the same request is fine.
    sim.sched.add_request(req(1, tokens(1, 260), 40)).unwrap();
    // Lists of at most 97 entries: one page each, so two run at once.
    let mut reqs = Vec::new();
    for i in 2..10u64 {
        let r = penalized(i, tokens(i as u32, 30 + i as usize * 3), 40);
        sim.sched.add_request(r.clone()).unwrap();
        reqs.push(r);
    }
    let mut most = 0;
    while sim.sched.has_unfinished() {
        let (step, _) = sim.step().expect("work left");
        let penalised = (step.batch.seqs.iter())
            .filter(|s| s.sample.as_ref().is_some_and(|s| s.params.has_penalties()))
            .count();
        assert!(penalised <= 2, "{penalised} penalised requests ran at once");
        assert!(sim.sched.stats().penalty_pages_used <= 2);
        most = most.max(penalised);
        sim.sched.check_invariants().unwrap();
        assert!(sim.steps < 10_000);
    }
    assert_eq!(most, 2);
    assert_eq!(sim.sched.stats().num_preemptions, 0);
    assert_eq!(sim.sched.stats().penalty_pages_used, 0);
    assert_outputs_alone(&sim, &reqs);
}

#[test]
fn a_list_outgrowing_the_penalty_pool_preempts() {
    // Three pages; two requests whose lists grow past one page while they decode, so the
    // second one to need its second page finds none and is preempted until the first ends.
    let c = SchedulerConfig {
        max_penalty_entries: 3 * PENALTY_PAGE,
        ..cfg(64, 512, 16)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    let reqs = [
        penalized(1, tokens(1, 100), 100),
        penalized(2, tokens(2, 110), 100),
    ];
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    while sim.sched.has_unfinished() {
        let (step, _) = sim.step().expect("work left");
        let pages: usize = (step.batch.seqs.iter().filter_map(|s| s.sample.as_ref()))
            .map(|s| s.penalties.num_pages())
            .sum();
        assert!(pages <= 3, "a step's lists hold {pages} pages");
        sim.sched.check_invariants().unwrap();
        assert!(sim.steps < 10_000);
    }
    assert!(
        sim.sched.stats().num_preemptions > 0,
        "the pool never ran out"
    );
    assert_outputs_alone(&sim, &reqs);
}

#[test]
fn block_copies_of_a_failed_step_are_not_trusted() {
    let c = SchedulerConfig {
        num_cpu_blocks: 40,
        max_model_len: 1024,
        ..cfg(40, 2048, 16)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    let a = tokens(1, 512);
    let run = |sim: &mut Sim, r: Request| {
        sim.sched.add_request(r.clone()).unwrap();
        sim.run_to_completion(sim.steps + 100);
        assert_eq!(
            sim.outputs[&r.id],
            reference_output(&r, 1024).0,
            "request {}",
            r.id
        );
        sim.finished[&r.id].1
    };
    run(&mut sim, req(1, a.clone(), 1));
    // B needs 32 of the 40 blocks: the step evicts A's blocks to the CPU tier, and fails, so
    // those copies never happened.
    sim.sched.add_request(req(2, tokens(2, 512), 1)).unwrap();
    let step = sim.sched.schedule().unwrap();
    assert!(!step.batch.swap_out.is_empty());
    sim.sched.fail_step(step);
    sim.sched.check_invariants().unwrap();
    // A again: only what is really on the GPU (8 blocks) may be a hit.
    assert_eq!(run(&mut sim, req(3, a.clone(), 1)), 8 * 16);
    // Now B for real (A's blocks go to the tier), then a step restoring them that fails.
    run(&mut sim, req(4, tokens(2, 512), 1));
    sim.sched.add_request(req(5, a.clone(), 1)).unwrap();
    let step = sim.sched.schedule().unwrap();
    assert!(!step.batch.swap_in.is_empty());
    sim.sched.fail_step(step);
    sim.sched.check_invariants().unwrap();
    run(&mut sim, req(6, a, 1));
    assert_clean(&sim.sched);
}
