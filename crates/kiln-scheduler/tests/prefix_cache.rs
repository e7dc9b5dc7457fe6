//! Prefix caching: agent loops, salts, the CPU tier.

mod common;

use common::{assert_clean, cfg, tokens};
use kiln_scheduler::testing::{Sim, reference_output};
use kiln_scheduler::{Request, Scheduler, SchedulerConfig};

fn req(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request {
        ignore_eos: true,
        ..Request::new(id, prompt, max_tokens)
    }
}

/// Runs one request to completion; returns (its output, its cached prompt tokens).
fn run_one(sim: &mut Sim, r: Request) -> (Vec<u32>, usize) {
    let id = r.id;
    let expected = reference_output(&r, sim.sched.max_len()).0;
    sim.sched.add_request(r).unwrap();
    sim.run_to_completion(10_000);
    assert_eq!(sim.outputs[&id], expected);
    (sim.outputs[&id].clone(), sim.finished[&id].1)
}

/// Ten agent turns; each prompt is the previous prompt + its output + `tail` new tokens.
/// Returns (prefill tokens, decode tokens, cached tokens per turn).
fn agent_loop(caching: bool, tail: usize, max_tokens: usize) -> (u64, u64, Vec<usize>) {
    let mut c = cfg(1024, 2048, 16);
    c.enable_prefix_caching = caching;
    let mut sim = Sim::new(Scheduler::new(c));
    let mut prompt = tokens(0, 16);
    let mut cached = Vec::new();
    for turn in 1..=10u64 {
        let (out, hit) = run_one(&mut sim, req(turn, prompt.clone(), max_tokens));
        cached.push(hit);
        prompt.extend(out);
        prompt.extend(tokens(turn as u32, tail));
    }
    assert_clean(&sim.sched);
    let st = sim.sched.stats();
    (st.total_prefill_tokens, st.total_decode_tokens, cached)
}

#[test]
fn agent_loop_prefills_only_the_new_tail_with_prefix_caching() {
    // Each turn adds exactly one block: the previous turn's single output token plus 15 new
    // tokens, so turn k's prompt is k blocks. The output token's KV is never computed (the
    // request ends as soon as it is sampled), which is why it belongs to the new block: then
    // everything before the new block is cached and the numbers come out at exactly one block
    // per turn: 10 blocks with caching, 1 + 2 + ... + 10 = 55 without.
    let (with, decode, cached) = agent_loop(true, 15, 1);
    assert_eq!(with, 10 * 16);
    assert_eq!(decode, 0);
    assert_eq!(cached, (0..10).map(|k| k * 16).collect::<Vec<_>>());
    let (without, _, cached) = agent_loop(false, 15, 1);
    assert_eq!(without, 55 * 16);
    assert_eq!(cached, vec![0; 10]);
}

#[test]
fn agent_loop_with_longer_outputs_recomputes_the_uncomputed_output_block() {
    // Tail of one block and 16 output tokens: each turn adds 2 blocks. The last output token
    // is sampled but never computed, so the previous turn's output block is not cached and is
    // prefilled again with the new tail: 16 + 9 * 32 = 304 prefill tokens with caching,
    // 16 * 10 + 32 * (0 + 1 + ... + 9) = 1600 without; 15 decodes per turn either way.
    let (with, decode, cached) = agent_loop(true, 16, 16);
    assert_eq!((with, decode), (304, 150));
    // Turn k >= 2 hits the whole previous prompt: 16 + 32 * (k - 2) tokens.
    assert_eq!(cached, vec![0, 16, 48, 80, 112, 144, 176, 208, 240, 272]);
    let (without, decode, _) = agent_loop(false, 16, 16);
    assert_eq!((without, decode), (1600, 150));
}

#[test]
fn whole_prompt_hit_still_computes_the_last_block_and_salts_isolate_tenants() {
    let mut sim = Sim::new(Scheduler::new(cfg(64, 2048, 16)));
    let p = tokens(7, 64);
    let salted = |id: u64, salt: Option<&str>| Request {
        cache_salt: salt.map(String::from),
        ..req(id, p.clone(), 1)
    };
    assert_eq!(run_one(&mut sim, salted(1, Some("a"))).1, 0);
    // Same prompt, other salt or none: nothing shared.
    assert_eq!(run_one(&mut sim, salted(2, Some("b"))).1, 0);
    assert_eq!(run_one(&mut sim, salted(3, None)).1, 0);
    // Same salt: the whole prompt is cached, but the hit is capped at (64 - 1) / 16 = 3 blocks
    // so that the last token is computed and sampled.
    let s = sim.sched.stats();
    assert_eq!(run_one(&mut sim, salted(4, Some("a"))).1, 48);
    assert_eq!(
        sim.sched.stats().total_prefill_tokens - s.total_prefill_tokens,
        16
    );
    assert_eq!(run_one(&mut sim, salted(5, None)).1, 48);
    let s = sim.sched.stats();
    assert_eq!(
        (s.prefix_cache_queries, s.prefix_cache_hits),
        (5 * 64, 2 * 48)
    );
    assert_clean(&sim.sched);
}

#[test]
fn concurrent_requests_share_cached_prefix_blocks() {
    let mut sim = Sim::new(Scheduler::new(cfg(64, 2048, 16)));
    let system = tokens(1, 48);
    let with_tail = |id: u64, tag: u32| {
        let mut p = system.clone();
        p.extend(tokens(tag, 20));
        req(id, p, 8)
    };
    sim.sched.add_request(with_tail(1, 2)).unwrap();
    sim.step().unwrap();
    sim.sched.add_request(with_tail(2, 3)).unwrap();
    let (step, _) = sim.step().unwrap();
    assert_eq!(step.summary(), vec![(1, 1), (2, 20)]);
    let (a, b) = (
        sim.sched.blocks_of(1).unwrap(),
        sim.sched.blocks_of(2).unwrap(),
    );
    assert_eq!(a[..3], b[..3]);
    assert!(a[3..].iter().all(|x| !b[3..].contains(x)));
    sim.run_to_completion(100);
    assert_eq!(sim.finished[&2].1, 48);
    assert_eq!(sim.outputs[&2], reference_output(&with_tail(2, 3), 16384).0);
    assert_clean(&sim.sched);
}

fn cpu_tier_run(num_cpu_blocks: usize) -> (Sim, u64, usize, Vec<u32>) {
    let c = SchedulerConfig {
        num_cpu_blocks,
        max_model_len: 1024,
        ..cfg(40, 2048, 16)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    // A's 32 blocks are cached; B's prompt then needs 32 of the 40 blocks and evicts A's last
    // 24 (freed tail first, after the 8 never-used blocks).
    let (out_a, _) = run_one(&mut sim, req(1, tokens(1, 512), 1));
    run_one(&mut sim, req(2, tokens(2, 512), 1));
    let mut p = tokens(1, 512);
    p.extend(out_a);
    p.extend(tokens(3, 15));
    let before = sim.sched.stats().total_prefill_tokens;
    let (out, cached) = run_one(&mut sim, req(3, p, 4));
    let prefill = sim.sched.stats().total_prefill_tokens - before;
    assert_clean(&sim.sched);
    (sim, prefill, cached, out)
}

#[test]
fn cpu_tier_restores_evicted_blocks_instead_of_recomputing() {
    let (on, prefill_on, cached_on, out_on) = cpu_tier_run(64);
    let (off, prefill_off, cached_off, out_off) = cpu_tier_run(0);
    assert_eq!(out_on, out_off);
    // With the tier: 8 blocks still on the GPU, 24 restored, only the new block computed.
    let s = on.sched.stats();
    assert_eq!(s.cpu_blocks_restored, 24);
    assert_eq!((cached_on, prefill_on), (512, 16));
    // 24 of A's blocks went out for B, then 26 of B's: 24 for A's restored blocks, one for its
    // new prompt block and one more when its decodes crossed into a 34th block.
    assert_eq!(s.cpu_blocks_stored, 24 + 26);
    assert_eq!(s.cpu_blocks_resident, 26);
    // Without: only the 8 blocks left on the GPU hit; 400 tokens recomputed.
    let s = off.sched.stats();
    assert_eq!((s.cpu_blocks_restored, s.cpu_blocks_stored), (0, 0));
    assert_eq!((cached_off, prefill_off), (128, 400));
}

#[test]
fn a_block_moved_to_the_cpu_tier_this_step_is_recomputed_not_restored() {
    // Its bytes reach host memory only after the step (the fake runner, like the GPU runner,
    // lands swap-outs last), so a hit on it in the same step would read a stale CPU block.
    let mut c = cfg(14, 2048, 16);
    c.num_cpu_blocks = 8;
    let mut sim = Sim::new(Scheduler::new(c));
    let a = tokens(1, 64);
    run_one(&mut sim, req(1, a.clone(), 1)); // 4 blocks, cached
    run_one(&mut sim, req(2, tokens(2, 32), 1)); // 2 blocks, cached after them
    // One step: B takes the 8 unused blocks and evicts A's last block to the CPU tier; C
    // (A's prompt and more) then finds A's first three blocks on the GPU and the fourth
    // leaving it, and takes the other prompt's two blocks for the rest.
    let b = req(3, tokens(3, 140), 1);
    let cr = req(4, [a, tokens(4, 5)].concat(), 3);
    let expected = reference_output(&cr, sim.sched.max_len()).0;
    sim.sched.add_request(b).unwrap();
    sim.sched.add_request(cr).unwrap();
    let (step, _) = sim.step().unwrap();
    assert_eq!(step.batch.seqs.len(), 2, "B and C in the same step");
    assert_eq!(step.batch.swap_out.len(), 3);
    assert!(step.batch.swap_in.is_empty());
    sim.run_to_completion(100);
    assert_eq!(sim.outputs[&4], expected);
    assert_eq!(sim.finished[&4].1, 48);
    assert_clean(&sim.sched);
}

/// Resetting the prefix cache lets go of every block no request holds, on the GPU and in the
/// CPU tier, announced as removed; a running request keeps its blocks, and the same prompt
/// afterwards is computed again with the same output.
#[test]
fn a_reset_drops_every_cached_block_no_request_holds() {
    let c = SchedulerConfig {
        num_cpu_blocks: 64,
        max_model_len: 1024,
        ..cfg(40, 2048, 16)
    };
    let mut sim = Sim::new(Scheduler::new(c));
    sim.sched.enable_kv_events();
    let (out_a, _) = run_one(&mut sim, req(1, tokens(1, 512), 1));
    run_one(&mut sim, req(2, tokens(2, 512), 1));
    // A request running through the reset keeps what it holds.
    sim.sched.add_request(req(4, tokens(4, 40), 8)).unwrap();
    sim.step().unwrap();
    let held = sim.sched.blocks_of(4).unwrap().to_vec();
    let s = sim.sched.stats();
    assert!(s.cpu_blocks_resident > 0 && s.kv_blocks_cached > 2, "{s:?}");
    sim.sched.take_kv_events();
    let (gpu, cpu) = sim.sched.reset_prefix_cache();
    assert_eq!((gpu, cpu), (s.kv_blocks_cached - 2, s.cpu_blocks_resident));
    let removed = sim.sched.take_kv_events().len();
    assert_eq!(removed, gpu + cpu, "one removal each");
    let s = sim.sched.stats();
    assert_eq!(s.cpu_blocks_resident, 0);
    assert_eq!(s.kv_blocks_cached, 2, "request 4's two full blocks");
    assert_eq!(sim.sched.blocks_of(4).unwrap(), held);
    sim.sched.check_invariants().unwrap();
    sim.run_to_completion(1000);
    let (out, cached) = run_one(&mut sim, req(3, tokens(1, 512), 1));
    assert_eq!((out, cached), (out_a, 0), "computed again");
    assert_clean(&sim.sched);
}
