//! LoRA adapters and the runner's slots: a step's requests run through at most as many
//! adapters as there are slots; a request whose adapter finds none free is passed over (those
//! behind it go ahead) until a slot's adapter is no longer needed, and is loaded into it;
//! every sequence's slot holds its request's adapter when the step runs; one passed over for
//! long stops requests through other adapters from being admitted, so it gets a slot.

mod common;

use std::collections::HashMap;

use common::{assert_outputs_alone, cfg, tokens};
use kiln_scheduler::testing::Sim;
use kiln_scheduler::{LoraRef, Request, Scheduler, SchedulerConfig, SchedulerError};

fn req(id: u64, adapter: Option<u32>, max_tokens: usize) -> Request {
    Request {
        ignore_eos: true,
        seed: id,
        lora: adapter.map(|id| LoraRef { id, fingerprint: 0 }),
        ..Request::new(id, tokens(id as u32, 20), max_tokens)
    }
}

fn slots(n: usize, resident: usize, loads: bool) -> SchedulerConfig {
    SchedulerConfig {
        lora_slots: n,
        lora_resident: resident,
        lora_loads: loads,
        ..cfg(64, 256, 8)
    }
}

#[test]
fn adapters_take_turns_in_the_slots() {
    let mut sim = Sim::new(Scheduler::new(slots(2, 0, true)));
    // Adapter 2 comes third: with 0 and 1 running it waits, and 4 and 5 go ahead of it.
    let reqs = [
        req(1, Some(0), 3),
        req(2, Some(1), 8),
        req(3, Some(2), 3),
        req(4, None, 3),
        req(5, Some(0), 3),
    ];
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    let adapter_of: HashMap<u64, Option<u32>> =
        reqs.iter().map(|r| (r.id, r.lora.map(|l| l.id))).collect();
    let mut held: HashMap<u32, u32> = HashMap::new();
    let mut first_step_of = HashMap::new();
    while sim.sched.has_unfinished() {
        let (step, _) = sim.step().expect("work left");
        for load in &step.lora_loads {
            held.insert(load.slot, load.id);
        }
        for (seq, s) in step.batch.seqs.iter().zip(&step.seqs) {
            first_step_of.entry(s.id).or_insert(sim.steps);
            let want = adapter_of[&s.id];
            assert_eq!(seq.lora.map(|slot| held[&slot]), want, "request {}", s.id);
        }
        let in_use: std::collections::HashSet<_> =
            step.batch.seqs.iter().filter_map(|s| s.lora).collect();
        assert!(in_use.len() <= 2);
        sim.sched.check_invariants().unwrap();
    }
    assert_eq!(first_step_of[&4], 1);
    assert_eq!(first_step_of[&5], 1);
    assert!(first_step_of[&3] > first_step_of[&1], "{first_step_of:?}");
    // Adapter 2 went into adapter 0's slot (adapter 1 ran longer): three loads in all.
    assert_eq!(sim.sched.stats().lora_loads, 3);
    assert_outputs_alone(&sim, &reqs);
}

#[test]
fn a_failed_step_loads_its_adapters_again() {
    let mut s = Scheduler::new(slots(1, 0, true));
    s.add_request(req(1, Some(3), 2)).unwrap();
    let step = s.schedule().unwrap();
    assert_eq!(step.lora_loads.len(), 1);
    assert_eq!(s.fail_step(step), [1]);
    s.add_request(req(2, Some(3), 2)).unwrap();
    let step = s.schedule().unwrap();
    assert_eq!(step.lora_loads.len(), 1, "the load may not have run");
}

#[test]
fn adapters_without_a_slot_are_refused() {
    let mut none = Scheduler::new(slots(0, 0, false));
    let e = none.add_request(req(1, Some(0), 2)).unwrap_err();
    assert_eq!(e, SchedulerError::NoLoraSlot { id: 1, adapter: 0 });
    // Adapters fixed at build: 0 and 1 run, 2 has no slot.
    let mut fixed = Scheduler::new(slots(2, 2, false));
    fixed.add_request(req(1, Some(1), 2)).unwrap();
    assert!(fixed.add_request(req(2, Some(2), 2)).is_err());
    let step = fixed.schedule().unwrap();
    assert!(step.lora_loads.is_empty());
    assert_eq!(step.batch.seqs[0].lora, Some(1));
}

/// One slot, requests through adapter 0 arriving every step, and one through adapter 1: after
/// 64 steps passed over, adapter 0's newcomers wait, its running requests end, and adapter
/// 1's request gets the slot while they keep arriving.
#[test]
fn a_request_passed_over_long_gets_a_slot() {
    let mut sim = Sim::new(Scheduler::new(slots(1, 0, true)));
    let mut reqs = vec![req(1, Some(0), 8), req(2, Some(1), 4)];
    for r in &reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    let mut started = None;
    for step in 0..150u64 {
        let r = req(100 + step, Some(0), 8);
        sim.sched.add_request(r.clone()).unwrap();
        reqs.push(r);
        let (s, _) = sim.step().expect("work left");
        if started.is_none() && s.seqs.iter().any(|q| q.id == 2) {
            started = Some(step);
        }
        sim.sched.check_invariants().unwrap();
    }
    let started = started.expect("adapter 1's request never ran");
    // Passed over 65 times, then the running requests' 8 tokens and the queue of eight seats.
    assert!((64..=96).contains(&started), "it started at step {started}");
    sim.run_to_completion(10_000);
    assert_outputs_alone(&sim, &reqs);
}
