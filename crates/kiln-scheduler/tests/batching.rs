//! Continuous batching, chunked prefill and paging, asserted step by step.

mod common;

use common::{assert_clean, cfg, tokens};
use kiln_scheduler::testing::{Sim, reference_output};
use kiln_scheduler::{FinishReason, Request, Scheduler};

fn req(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request {
        ignore_eos: true,
        ..Request::new(id, prompt, max_tokens)
    }
}

#[test]
fn finished_request_frees_its_seat_for_the_next_step() {
    // Two seats. A finishes at step 10 (prefill samples token 1, nine decodes give 2..10).
    let mut sim = Sim::new(Scheduler::new(cfg(64, 2048, 2)));
    sim.sched.add_request(req(1, tokens(1, 8), 10)).unwrap();
    sim.sched.add_request(req(2, tokens(2, 8), 100)).unwrap();
    sim.sched.add_request(req(3, tokens(3, 8), 5)).unwrap();

    let (step, updates) = sim.step().unwrap();
    assert_eq!(step.summary(), vec![(1, 8), (2, 8)]);
    assert!(step.seqs.iter().all(|s| s.sampled));
    assert_eq!(updates.len(), 2);
    assert_eq!(sim.sched.stats().num_waiting, 1);
    for n in 2..=10 {
        let (step, updates) = sim.step().unwrap();
        assert_eq!(step.summary(), vec![(1, 1), (2, 1)], "step {n}");
        assert!(step.seqs.iter().all(|s| s.is_decode));
        let a = updates.iter().find(|u| u.id == 1).unwrap();
        assert_eq!(
            a.finished,
            (n == 10).then_some(FinishReason::Length),
            "step {n}"
        );
        assert_eq!(sim.sched.stats().num_waiting, 1);
    }
    assert_eq!(sim.outputs[&1].len(), 10);
    assert_eq!(sim.sched.running_ids(), &[2]);
    assert_eq!(sim.sched.blocks_of(1), None);

    // Step 11: B decodes, C takes A's seat with its whole prompt.
    let (step, _) = sim.step().unwrap();
    assert_eq!(step.summary(), vec![(2, 1), (3, 8)]);
    assert_eq!(sim.sched.running_ids(), &[2, 3]);
    assert_eq!(sim.sched.stats().num_waiting, 0);

    sim.run_to_completion(200);
    for (id, r) in [
        (1, req(1, tokens(1, 8), 10)),
        (2, req(2, tokens(2, 8), 100)),
        (3, req(3, tokens(3, 8), 5)),
    ] {
        assert_eq!(sim.outputs[&id], reference_output(&r, 16384).0);
    }
    assert_clean(&sim.sched);
}

#[test]
fn long_prompt_is_chunked_while_running_requests_keep_decoding() {
    // Budget 2051 = 2048 prefill + 3 decodes, so the chunks fall exactly on 0-2047, 2048-4095,
    // 4096-6143, 6144-8191 (decodes are scheduled first; with a plain 2048 budget the chunks
    // would be 2045 tokens each and the prompt would need five steps).
    let mut sim = Sim::new(Scheduler::new(cfg(1024, 2051, 256)));
    for id in 1..=3 {
        sim.sched
            .add_request(req(id, tokens(id as u32, 16), 100))
            .unwrap();
    }
    let (step, _) = sim.step().unwrap();
    assert_eq!(step.summary(), vec![(1, 16), (2, 16), (3, 16)]);

    sim.sched.add_request(req(9, tokens(9, 8192), 4)).unwrap();
    for chunk in 0..4u32 {
        let (step, updates) = sim.step().unwrap();
        assert_eq!(step.summary(), vec![(1, 1), (2, 1), (3, 1), (9, 2048)]);
        let seg = &step.batch.seqs[3];
        assert_eq!((seg.query_start, seg.query_len), (3, 2048));
        assert_eq!(seg.context_len, (chunk + 1) * 2048);
        assert_eq!(step.batch.positions[3], chunk * 2048);
        assert_eq!(*step.batch.positions.last().unwrap(), chunk * 2048 + 2047);
        // Each chunk sends only the 128 blocks it adds to the table.
        assert_eq!(seg.table_from as usize, chunk as usize * 128);
        assert_eq!(seg.table_tail.len(), 128);
        // Only the chunk that reaches the end of the prompt is sampled.
        assert_eq!(seg.sample.is_some(), chunk == 3);
        assert_eq!(updates.len(), if chunk == 3 { 4 } else { 3 });
        let st = sim.sched.stats();
        assert_eq!((st.step_prefill_tokens, st.step_decode_tokens), (2048, 3));
    }
    assert_eq!(sim.outputs[&9].len(), 1);
    assert_eq!(sim.outputs[&1].len(), 5);
    sim.run_to_completion(200);
    assert_clean(&sim.sched);
}

#[test]
fn paging_admits_four_where_contiguous_reservation_fits_three() {
    // max_model_len 1024 = 64 blocks; a contiguous max-length reservation per request would
    // fill this 192-block pool with 3 requests.
    let max_model_len = 1024;
    let pool = 192;
    assert_eq!(pool / (max_model_len / 16), 3);
    let mut c = cfg(pool, 2048, 256);
    c.max_model_len = max_model_len;
    let mut sim = Sim::new(Scheduler::new(c));
    for id in 1..=4 {
        sim.sched
            .add_request(req(id, tokens(id as u32, 384), 64))
            .unwrap();
    }
    let (step, _) = sim.step().unwrap();
    assert_eq!(step.summary(), vec![(1, 384), (2, 384), (3, 384), (4, 384)]);
    let st = sim.sched.stats();
    assert_eq!(st.num_running, 4);
    // 4 x 24 blocks in use: exactly half the pool is still free.
    assert_eq!((st.kv_blocks_used, st.kv_blocks_free), (96, 96));
    sim.run_to_completion(200);
    let st = sim.sched.stats();
    assert_eq!(st.num_preemptions, 0);
    // At the end each held 28 blocks (384 + 63 computed tokens): 112 of 192.
    assert_eq!(sim.steps, 64);
    assert_clean(&sim.sched);
}
