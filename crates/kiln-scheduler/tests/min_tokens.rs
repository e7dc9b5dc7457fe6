//! `min_tokens`: the sampler is told to ban end-of-sequence and stop tokens (their bias
//! [`BANNED`]) for exactly the first `min_tokens` draws, then given their own biases back;
//! the list exists for the ban alone, and a `min_tokens` above `max_tokens` is refused.

mod common;

use std::collections::HashMap;

use common::{assert_clean, cfg, tokens};
use kiln_scheduler::testing::Sim;
use kiln_scheduler::{BANNED, Request, Scheduler, SchedulerError};

/// Runs `r` alone; for each draw, the bias the sampler's list holds for each of `watch`.
fn biases_per_draw(r: Request, watch: &[u32]) -> Vec<Vec<f32>> {
    let mut sim = Sim::new(Scheduler::new(cfg(64, 512, 16)));
    sim.sched.add_request(r).unwrap();
    let mut list: HashMap<u32, u32> = HashMap::new(); // list index -> token
    let mut bias: HashMap<u32, f32> = HashMap::new(); // token -> bias
    let mut draws = Vec::new();
    while sim.sched.has_unfinished() {
        let (step, _) = sim.step().expect("work left");
        for s in &step.batch.seqs {
            let Some(spec) = &s.sample else { continue };
            for (i, e) in &spec.penalties.entries {
                list.insert(*i, e.token_id);
                bias.insert(e.token_id, e.bias);
            }
            assert_eq!(spec.draw_index as usize, draws.len());
            draws.push(
                watch
                    .iter()
                    .map(|t| bias.get(t).copied().unwrap_or(0.0))
                    .collect(),
            );
        }
        assert!(sim.steps < 1000);
    }
    assert_clean(&sim.sched);
    draws
}

#[test]
fn end_and_stop_tokens_are_banned_for_the_first_draws_only() {
    // Ids the fake model never draws, so the request runs to its length.
    let (eos, stop, biased) = (7, 8, 9);
    let r = Request {
        eos_token_ids: vec![eos],
        stop_token_ids: vec![stop, eos],
        logit_bias: vec![(stop, 2.5), (biased, -1.0)],
        min_tokens: 3,
        seed: 4,
        ..Request::new(1, tokens(1, 40), 6)
    };
    let got = biases_per_draw(r.clone(), &[eos, stop, biased]);
    let banned = vec![BANNED, BANNED, -1.0];
    let own = vec![0.0, 2.5, -1.0];
    assert_eq!(
        got,
        [&banned, &banned, &banned, &own, &own, &own].map(|v| v.clone())
    );

    // With end-of-sequence ignored only the stop token is banned; with no min_tokens, none.
    let ignoring = Request {
        ignore_eos: true,
        stop_token_ids: vec![stop],
        logit_bias: vec![],
        ..r.clone()
    };
    let got = biases_per_draw(ignoring, &[eos, stop]);
    assert_eq!(got[..3], vec![vec![0.0, BANNED]; 3]);
    assert_eq!(got[3..], vec![vec![0.0, 0.0]; 3]);
    let plain = Request {
        min_tokens: 0,
        logit_bias: vec![],
        ..r.clone()
    };
    assert!(biases_per_draw(plain, &[eos]).iter().all(|b| b == &[0.0]));

    let too_many = Request { min_tokens: 7, ..r };
    let mut s = Scheduler::new(cfg(64, 512, 16));
    let e = s.add_request(too_many).unwrap_err();
    assert!(matches!(e, SchedulerError::InvalidSampling { .. }), "{e:?}");
    assert!(e.to_string().contains("min_tokens (7)"), "{e}");
}
