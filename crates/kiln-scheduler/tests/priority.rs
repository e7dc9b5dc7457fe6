//! Priorities (vLLM's `priority`, lower first): the waiting queue is served by priority, then
//! arrival, and the running request preempted first is the one of lowest priority, even when
//! it was admitted first. Every request's output is still its own alone.

mod common;

use common::{assert_clean, assert_outputs_alone, cfg, tokens};
use kiln_core::BLOCK_SIZE;
use kiln_scheduler::testing::{Sim, reference_output};
use kiln_scheduler::{Request, Scheduler};

fn req(id: u64, priority: i32, prompt_len: usize, max_tokens: usize) -> Request {
    Request {
        ignore_eos: true,
        seed: id,
        priority,
        ..Request::new(id, tokens(id as u32, prompt_len), max_tokens)
    }
}

#[test]
fn waiting_requests_are_served_by_priority_then_arrival() {
    // One running at a time, so the admission order is the queue's.
    let mut sim = Sim::new(Scheduler::new(cfg(64, 256, 1)));
    let reqs = [
        req(1, 0, 20, 3),
        req(2, 1, 20, 3),
        req(3, -1, 20, 3),
        req(4, 0, 20, 3),
    ];
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    let mut order = Vec::new();
    while sim.sched.has_unfinished() {
        sim.step().expect("work left");
        for &id in sim.sched.running_ids() {
            if !order.contains(&id) {
                order.push(id);
            }
        }
        sim.sched.check_invariants().unwrap();
    }
    assert_eq!(order, [3, 1, 4, 2]);
    assert_outputs_alone(&sim, &reqs);
}

#[test]
fn the_lowest_priority_is_preempted_first_even_when_admitted_first() {
    // 10 blocks: the low-priority request (admitted first) and the high-priority one (admitted
    // second) cannot both reach their ends, so one is preempted; it must be the former, and
    // the latter is never preempted.
    let mut sim = Sim::new(Scheduler::new(cfg(10, 512, 4)));
    let (low, high) = (
        req(1, 5, 3 * BLOCK_SIZE, 3 * BLOCK_SIZE),
        req(2, 0, 3 * BLOCK_SIZE, 3 * BLOCK_SIZE),
    );
    sim.sched.add_request(low.clone()).unwrap();
    sim.step().expect("the low-priority request starts");
    sim.sched.add_request(high.clone()).unwrap();
    let mut preempted = Vec::new();
    let mut was_running: Vec<u64> = sim.sched.running_ids().to_vec();
    while sim.sched.has_unfinished() {
        sim.step().expect("work left");
        for id in was_running {
            let finished = sim.finished.contains_key(&id);
            if !finished && !sim.sched.running_ids().contains(&id) {
                preempted.push(id);
            }
        }
        was_running = sim.sched.running_ids().to_vec();
        sim.sched.check_invariants().unwrap();
        assert!(sim.steps < 10_000);
    }
    assert!(!preempted.is_empty(), "the pool was meant to run out");
    assert!(preempted.iter().all(|&id| id == 1), "{preempted:?}");
    for r in [&low, &high] {
        assert_eq!(sim.outputs[&r.id], reference_output(r, 16384).0);
    }
    assert_clean(&sim.sched);
}
