//! A sliding window on every layer: running requests give back the blocks behind their
//! window, nothing they still read is lost, and the pool no longer caps a sequence's length.
//! The fake runner reads each token's window through the block table, so a block given back
//! too early fails the run.

mod common;

use common::{assert_clean, cfg, tokens};
use kiln_core::{BLOCK_SIZE, NO_BLOCK};
use kiln_scheduler::testing::{Sim, next_token, reference_output_in_window};
use kiln_scheduler::{FinishReason, Request, Scheduler, SchedulerConfig};

const WINDOW: usize = 40;

fn windowed(c: SchedulerConfig) -> SchedulerConfig {
    SchedulerConfig {
        sliding_window: Some(WINDOW),
        ..c
    }
}

/// Runs `reqs` to completion and checks each output against the windowed fake model alone.
fn run(c: SchedulerConfig, reqs: &[Request]) -> Sim {
    let mut sim = Sim::new(Scheduler::new(c));
    for r in reqs {
        sim.sched.add_request(r.clone()).unwrap();
    }
    sim.run_to_completion(10_000);
    let max_len = sim.sched.max_len();
    for r in reqs {
        let (out, why) = reference_output_in_window(r, max_len, Some(WINDOW), next_token);
        assert_eq!(sim.outputs[&r.id], out, "request {}", r.id);
        assert_eq!(sim.finished[&r.id].0, why, "request {}", r.id);
    }
    assert_clean(&sim.sched);
    sim
}

/// 24 requests of 100-300 tokens, half sharing a 64-token prefix, in a pool of 40 blocks
/// (about 12 such requests without giving blocks back), in chunks of 48 tokens.
fn workload() -> Vec<Request> {
    (0..24u64)
        .map(|id| {
            let mut prompt = if id % 2 == 0 {
                tokens(0, 64)
            } else {
                Vec::new()
            };
            prompt.extend(tokens(id as u32 + 1, 20 + 7 * id as usize));
            Request {
                seed: id,
                ignore_eos: true,
                ..Request::new(id, prompt, 60 + 5 * id as usize)
            }
        })
        .collect()
}

#[test]
fn requests_give_back_blocks_behind_the_window_and_outputs_match() {
    let c = windowed(SchedulerConfig {
        max_model_len: 4096,
        ..cfg(40, 48, 24)
    });
    let sim = run(c.clone(), &workload());
    let s = sim.sched.stats();
    assert!(s.window_released_blocks > 100, "{s:?}");
    assert!(s.prefix_cache_hits > 0, "{s:?}");

    // The same without prefix caching, and with a CPU tier behind the pool.
    for c in [
        SchedulerConfig {
            enable_prefix_caching: false,
            ..c.clone()
        },
        SchedulerConfig {
            num_cpu_blocks: 32,
            ..c
        },
    ] {
        let s = run(c, &workload()).sched.stats();
        assert!(s.window_released_blocks > 100, "{s:?}");
    }
}

#[test]
fn a_long_request_holds_only_its_window() {
    // 6 blocks (96 tokens) hold the window (40) plus a 16-token chunk, so the pool no
    // longer caps the length: a 600-token sequence runs in it.
    let c = windowed(SchedulerConfig {
        max_model_len: 1000,
        ..cfg(6, 16, 4)
    });
    assert_eq!(c.max_len(), 1000);
    let mut sim = Sim::new(Scheduler::new(c.clone()));
    let r = Request {
        ignore_eos: true,
        ..Request::new(1, tokens(1, 200), 400)
    };
    sim.sched.add_request(r.clone()).unwrap();
    let mut most_held = 0;
    while sim.sched.has_unfinished() {
        sim.step().unwrap();
        if let Some(table) = sim.sched.blocks_of(1) {
            let held = table.iter().filter(|&&b| b != NO_BLOCK).count();
            most_held = most_held.max(held);
            let computed = sim.sched.num_computed(1).unwrap();
            // Every block from the next token's window on is held, none before it.
            let first = (computed + 1).saturating_sub(WINDOW) / BLOCK_SIZE;
            assert!(table[..first].iter().all(|&b| b == NO_BLOCK), "{table:?}");
            assert!(table[first..].iter().all(|&b| b != NO_BLOCK), "{table:?}");
        }
    }
    assert!(
        most_held <= (WINDOW + 16).div_ceil(BLOCK_SIZE) + 1,
        "{most_held}"
    );
    assert_eq!(
        sim.outputs[&1],
        reference_output_in_window(&r, 1000, Some(WINDOW), next_token).0
    );
    assert_eq!(sim.finished[&1].0, FinishReason::Length);
    assert_eq!(sim.sched.stats().num_preemptions, 0);
    assert_clean(&sim.sched);

    // Without a window, or with a budget the pool cannot hold beside the window, the pool
    // caps the length as before.
    assert_eq!(
        SchedulerConfig {
            sliding_window: None,
            ..c.clone()
        }
        .max_len(),
        96
    );
    assert_eq!(
        SchedulerConfig {
            max_num_batched_tokens: 64,
            ..c
        }
        .max_len(),
        96
    );
}

#[test]
fn a_cached_prefix_behind_the_window_is_not_taken() {
    // The second request starts with the first's 160-token prompt: of its 10 cached blocks
    // it takes only those the window of its first token to compute (position 160) reaches.
    let c = windowed(cfg(64, 2048, 4));
    let mut sim = Sim::new(Scheduler::new(c));
    let first = Request::new(1, tokens(1, 160), 1);
    sim.sched.add_request(first).unwrap();
    sim.run_to_completion(10);
    let second = Request::new(2, [tokens(1, 160), tokens(2, 5)].concat(), 3);
    sim.sched.add_request(second.clone()).unwrap();
    sim.step().unwrap();
    let table = sim.sched.blocks_of(2).unwrap();
    let behind = (160 + 1 - WINDOW) / BLOCK_SIZE;
    assert_eq!(table.iter().filter(|&&b| b == NO_BLOCK).count(), behind);
    assert_eq!(sim.sched.stats().prefix_cache_hits, 160);
    sim.run_to_completion(20);
    assert_eq!(
        sim.outputs[&2],
        reference_output_in_window(&second, 1000, Some(WINDOW), next_token).0
    );
    assert_clean(&sim.sched);
}
