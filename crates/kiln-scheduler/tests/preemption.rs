//! Pool exhaustion, preemption and aborts: nothing is lost, leaked or corrupted.

mod common;

use common::{assert_clean, below, cfg, tokens};
use kiln_core::SampledToken;
use kiln_scheduler::testing::{FIRST_TOKEN, Sim, reference_output};
use kiln_scheduler::{FinishReason, Request, Scheduler, SchedulerConfig};

/// 64 requests, half of them sharing a 48-token system prompt, with varied lengths; EOS is a
/// token the fake model produces about once in 200 draws.
fn workload() -> Vec<Request> {
    let mut next = below(0x9e37_79b9_7f4a_7c15u64);
    (0..64u64)
        .map(|id| {
            let mut prompt = if id % 2 == 0 {
                tokens(0, 48)
            } else {
                Vec::new()
            };
            prompt.extend(tokens(id as u32 + 1, 17 + next(180) as usize));
            Request {
                seed: id,
                eos_token_ids: (0..5).map(|k| FIRST_TOKEN + 7 + k * 200).collect(),
                ..Request::new(id, prompt, 20 + next(100) as usize)
            }
        })
        .collect()
}

fn run_workload(c: SchedulerConfig) -> Sim {
    let mut sim = Sim::new(Scheduler::new(c));
    let reqs = workload();
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    sim.run_to_completion(20_000);
    let max_len = sim.sched.max_len();
    for r in &reqs {
        let (out, why) = reference_output(r, max_len);
        assert_eq!(sim.outputs[&r.id], out, "request {}", r.id);
        assert_eq!(sim.finished[&r.id].0, why, "request {}", r.id);
    }
    assert_clean(&sim.sched);
    sim
}

#[test]
fn pool_exhaustion_preempts_and_every_output_matches_running_alone() {
    // 150 blocks for 64 requests of up to ~22 blocks each.
    let c = SchedulerConfig {
        max_model_len: 1024,
        ..cfg(150, 512, 64)
    };
    let sim = run_workload(c.clone());
    let s = sim.sched.stats();
    assert!(s.num_preemptions > 0, "{s:?}");
    assert!(s.prefix_cache_hits > 0, "{s:?}");
    assert!(sim.finished.values().any(|f| f.0 == FinishReason::Stop));

    // The same with the CPU tier on and with prefix caching off: same outputs (checked inside).
    let with_tier = run_workload(SchedulerConfig {
        num_cpu_blocks: 64,
        ..c.clone()
    });
    let t = with_tier.sched.stats();
    eprintln!("caching: {s:?}\ntier: {t:?}");
    assert!(
        t.cpu_blocks_stored > 0 && t.cpu_blocks_restored > 0,
        "{t:?}"
    );
    let no_cache = run_workload(SchedulerConfig {
        enable_prefix_caching: false,
        ..c
    });
    assert!(no_cache.sched.stats().num_preemptions > 0);
    assert_eq!(no_cache.sched.stats().prefix_cache_queries, 0);
}

#[test]
fn a_request_alone_in_a_tiny_pool_runs_to_its_length_limit() {
    // A 4-block pool caps every sequence at 64 tokens: the request stops there (Length)
    // instead of preempting itself forever, and a 64-token prompt is refused up front.
    let mut sim = Sim::new(Scheduler::new(SchedulerConfig {
        max_model_len: 1000,
        ..cfg(4, 2048, 8)
    }));
    assert_eq!(sim.sched.max_len(), 64);
    let r = Request {
        ignore_eos: true,
        ..Request::new(1, tokens(1, 40), 100)
    };
    assert!(
        sim.sched
            .add_request(Request::new(2, tokens(2, 64), 1))
            .is_err()
    );
    sim.sched.add_request(r.clone()).unwrap();
    sim.run_to_completion(100);
    assert_eq!(sim.outputs[&1], reference_output(&r, 64).0);
    assert_eq!(sim.outputs[&1].len(), 24);
    assert_eq!(sim.finished[&1].0, FinishReason::Length);
    assert_clean(&sim.sched);
}

#[test]
fn abort_of_running_and_waiting_requests_frees_everything() {
    let mut sim = Sim::new(Scheduler::new(cfg(64, 2048, 2)));
    for id in 1..=4 {
        sim.sched
            .add_request(Request::new(id, tokens(id as u32, 40), 50))
            .unwrap();
    }
    sim.step().unwrap();
    sim.step().unwrap();
    assert_eq!(sim.sched.running_ids(), &[1, 2]);
    assert_eq!(sim.sched.blocks_of(1).unwrap().len(), 3);

    let u = sim.sched.abort(1).unwrap();
    assert_eq!(u.finished, Some(FinishReason::Abort));
    assert_eq!(
        sim.sched.abort(3).unwrap().finished,
        Some(FinishReason::Abort)
    );
    assert_eq!(sim.sched.abort(3), None);
    sim.sched.check_invariants().unwrap();
    assert_eq!(sim.sched.stats().kv_blocks_used, 3);

    // An abort between schedule and update: the step's result for it is dropped.
    let step = sim.sched.schedule().unwrap();
    assert_eq!(step.summary(), vec![(2, 1), (4, 40)]);
    sim.sched.abort(4).unwrap();
    let sampled: Vec<SampledToken> = step
        .seqs
        .iter()
        .filter(|s| s.sampled)
        .map(|_| SampledToken {
            token_id: 5,
            logprob: None,
            top_logprobs: vec![],
            rank: None,
            hidden: None,
        })
        .collect();
    let updates = sim.sched.update(step, &sampled);
    assert_eq!(updates.iter().map(|u| u.id).collect::<Vec<_>>(), vec![2]);
    sim.sched.check_invariants().unwrap();

    sim.sched.abort(2).unwrap();
    assert!(sim.sched.schedule().is_none());
    assert_clean(&sim.sched);
}
