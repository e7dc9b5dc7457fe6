#![allow(dead_code)]

use kiln_scheduler::testing::{Sim, reference_output};
use kiln_scheduler::{Request, Scheduler, SchedulerConfig};

pub fn cfg(
    num_gpu_blocks: usize,
    max_num_batched_tokens: usize,
    max_num_seqs: usize,
) -> SchedulerConfig {
    SchedulerConfig {
        max_num_batched_tokens,
        max_num_seqs,
        num_gpu_blocks,
        num_cpu_blocks: 0,
        enable_prefix_caching: true,
        max_model_len: 16384,
        max_penalty_entries: usize::MAX,
        max_sampler_rows: max_num_seqs,
        sliding_window: None,
        speculation: None,
        lora_slots: 0,
        lora_resident: 0,
        lora_loads: false,
    }
}

/// `n` tokens that no other call with a different `tag` produces.
pub fn tokens(tag: u32, n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 10_000 + tag * 100_000 + i).collect()
}

/// With every request finished or aborted: nothing in use, everything free or cached, all
/// reference counts zero (checked by `check_invariants` against zero holders).
pub fn assert_clean(s: &Scheduler) {
    assert!(!s.has_unfinished());
    s.check_invariants().expect("invariants");
    let st = s.stats();
    assert_eq!(st.kv_blocks_used, 0);
    assert_eq!(st.kv_blocks_free, s.config().num_gpu_blocks);
    assert_eq!((st.num_running, st.num_waiting), (0, 0));
}

/// Every one of `reqs` got its output alone (the fake model's, within [`cfg`]'s length), and
/// then the scheduler is clean ([`assert_clean`]).
pub fn assert_outputs_alone(sim: &Sim, reqs: &[Request]) {
    for r in reqs {
        let want = reference_output(r, 16384).0;
        assert_eq!(sim.outputs[&r.id], want, "request {}", r.id);
    }
    assert_clean(&sim.sched);
}

/// A xorshift generator: each call returns a number below its argument.
pub fn below(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = seed;
    move |m| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    }
}
