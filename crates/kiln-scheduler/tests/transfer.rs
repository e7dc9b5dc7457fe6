//! Prefill on one scheduler, decode on another: pinned blocks, imported blocks.

mod common;

use common::{assert_clean, cfg, tokens};
use kiln_scheduler::testing::{Sim, reference_output};
use kiln_scheduler::{Request, Scheduler};

fn req(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Request {
    Request {
        ignore_eos: true,
        ..Request::new(id, prompt, max_tokens)
    }
}

/// A producer that prefilled `prompt` (one token sampled) and pinned its full blocks.
fn producer(prompt: &[u32]) -> Sim {
    let mut p = Sim::new(Scheduler::new(cfg(32, 2048, 8)));
    p.sched
        .add_request(Request {
            pin_blocks: true,
            ..req(1, prompt.to_vec(), 1)
        })
        .unwrap();
    p.run_to_completion(100);
    p
}

/// A consumer with a CPU tier of `cpu` blocks.
fn consumer(cpu: usize) -> Sim {
    let mut c = cfg(32, 2048, 8);
    c.num_cpu_blocks = cpu;
    Sim::new(Scheduler::new(c))
}

/// Moves request 1's pinned blocks from `p` to `c` with `keys` as sent; returns how many
/// were stored.
fn transfer(p: &Sim, c: &mut Sim, keys: &[u64], salt: Option<&str>) -> usize {
    let pin = p.sched.pinned(1).unwrap();
    let stored = c.sched.import_blocks(&pin.tokens, keys, salt, 0);
    for &(i, cpu) in &stored {
        c.runner
            .fill_cpu_block(cpu, &p.runner.gpu_block(pin.blocks[i]));
    }
    c.sched.check_invariants().unwrap();
    stored.len()
}

/// Runs `prompt` on `c` and checks its output against the reference; returns its cached
/// prompt tokens.
fn decode(c: &mut Sim, id: u64, prompt: &[u32]) -> usize {
    let r = req(id, prompt.to_vec(), 6);
    let expected = reference_output(&r, c.sched.max_len()).0;
    c.sched.add_request(r).unwrap();
    c.run_to_completion(100);
    assert_eq!(c.outputs[&id], expected);
    c.finished[&id].1
}

#[test]
fn a_finished_request_pins_its_full_blocks_until_unpinned() {
    let prompt = tokens(1, 100);
    let mut p = producer(&prompt);
    let pin = p.sched.pinned(1).unwrap().clone();
    assert_eq!(pin.blocks.len(), 6);
    assert_eq!(pin.tokens, prompt[..96]);
    assert_eq!(pin.keys.len(), 6);
    let st = p.sched.stats();
    assert_eq!((st.kv_blocks_pinned, st.kv_blocks_used), (6, 6));
    // Pinned blocks are in use: the invariant check counts the pin as their holder.
    p.sched.check_invariants().unwrap();
    assert!(p.sched.unpin(1));
    assert!(!p.sched.unpin(1));
    assert_clean(&p.sched);
    // Without the flag nothing is pinned.
    p.sched.add_request(req(2, prompt, 1)).unwrap();
    p.run_to_completion(100);
    assert!(p.sched.pinned(2).is_none());
    assert_clean(&p.sched);
}

#[test]
fn imported_blocks_are_restored_and_only_the_tail_is_prefilled() {
    let prompt = tokens(2, 100);
    let p = producer(&prompt);
    let keys = p.sched.pinned(1).unwrap().keys.clone();
    let mut c = consumer(16);
    assert_eq!(transfer(&p, &mut c, &keys, None), 6);
    assert_eq!(c.sched.stats().imported_blocks, 6);
    // The output equals the reference only if every restored slot holds the right token.
    assert_eq!(decode(&mut c, 7, &prompt), 96);
    let st = c.sched.stats();
    assert_eq!(st.total_prefill_tokens, 4);
    assert_eq!(st.cpu_blocks_restored, 6);
    // A second import of the same blocks finds them cached: nothing to copy.
    assert_eq!(transfer(&p, &mut c, &keys, None), 0);
    assert_clean(&c.sched);
}

#[test]
fn a_block_whose_key_differs_is_refused_with_everything_after_it() {
    let prompt = tokens(3, 100);
    let p = producer(&prompt);
    let mut keys = p.sched.pinned(1).unwrap().keys.clone();
    keys[2] ^= 1;
    let mut c = consumer(16);
    assert_eq!(transfer(&p, &mut c, &keys, None), 2);
    assert_eq!(decode(&mut c, 7, &prompt), 32);
    // Another salt means other keys: nothing is taken.
    let keys = p.sched.pinned(1).unwrap().keys.clone();
    let mut c = consumer(16);
    assert_eq!(transfer(&p, &mut c, &keys, Some("tenant")), 0);
    assert_eq!(decode(&mut c, 7, &prompt), 0);
    // Without a CPU tier nothing can be stored; with a small one, the first blocks.
    let mut c = consumer(0);
    assert_eq!(transfer(&p, &mut c, &keys, None), 0);
    let mut c = consumer(4);
    assert_eq!(transfer(&p, &mut c, &keys, None), 4);
    assert_eq!(decode(&mut c, 7, &prompt), 64);
    assert_clean(&c.sched);
}

#[test]
fn pinned_blocks_are_never_evicted() {
    // A pool of 8 blocks: 6 pinned, so a request needing 3 more cannot be admitted until
    // the pin is released, and then it finds the pinned prefix cached.
    let prompt = tokens(4, 100);
    let mut c = cfg(8, 2048, 8);
    c.max_model_len = 128;
    let mut p = Sim::new(Scheduler::new(c));
    p.sched
        .add_request(Request {
            pin_blocks: true,
            ..req(1, prompt.clone(), 1)
        })
        .unwrap();
    p.run_to_completion(100);
    let other = tokens(5, 40);
    p.sched.add_request(req(2, other, 1)).unwrap();
    assert!(p.step().is_none(), "admitted into pinned blocks");
    assert!(p.sched.unpin(1));
    p.run_to_completion(100);
    let mut again = prompt.clone();
    again.extend(tokens(6, 3));
    p.sched.add_request(req(3, again, 1)).unwrap();
    p.run_to_completion(100);
    assert_eq!(
        p.finished[&3].1, 80,
        "the pinned prefix, less the block request 2 took"
    );
    assert_clean(&p.sched);
}

/// What the disk tier reads: the keys a prompt's blocks are cached under, where each block's
/// bytes are, and an import of the blocks after those cached already.
#[test]
fn cached_blocks_are_found_by_key_and_the_tail_imported_after_them() {
    let prompt = tokens(4, 100);
    let p = producer(&prompt);
    let pin = p.sched.pinned(1).unwrap().clone();
    assert_eq!(kiln_scheduler::prefix_keys(&prompt, None), pin.keys);
    assert_ne!(
        kiln_scheduler::prefix_keys(&prompt, Some("tenant")),
        pin.keys
    );
    let salted = kiln_scheduler::prefix_keys(&prompt, Some("tenant"));
    assert_eq!(p.sched.cached_prefix_blocks(&pin.keys, &prompt, None), 6);
    assert_eq!(
        p.sched
            .cached_prefix_blocks(&salted, &prompt, Some("tenant")),
        0
    );
    let b = p.sched.cached_block(pin.keys[3]).unwrap();
    assert_eq!(b.place, kiln_scheduler::BlockPlace::Gpu(pin.blocks[3]));
    assert_eq!(
        (b.parent, &b.tokens[..]),
        (Some(pin.keys[2]), &prompt[48..64])
    );
    assert!(p.sched.cached_block(pin.keys[3] ^ 1).is_none());

    // The consumer computes the first 2 blocks itself, then takes the other 4.
    let mut c = consumer(16);
    c.sched
        .add_request(req(5, prompt[..40].to_vec(), 1))
        .unwrap();
    c.run_to_completion(100);
    assert_eq!(c.sched.cached_prefix_blocks(&pin.keys, &prompt, None), 2);
    let stored = c.sched.import_blocks(&pin.tokens, &pin.keys, None, 2);
    assert_eq!(stored.iter().map(|s| s.0).collect::<Vec<_>>(), [2, 3, 4, 5]);
    for &(i, cpu) in &stored {
        c.runner
            .fill_cpu_block(cpu, &p.runner.gpu_block(pin.blocks[i]));
    }
    let at = c.sched.cached_block(pin.keys[4]).unwrap().place;
    assert!(matches!(at, kiln_scheduler::BlockPlace::Cpu(_)), "{at:?}");
    assert_eq!(c.sched.cached_prefix_blocks(&pin.keys, &prompt, None), 6);
    assert_eq!(decode(&mut c, 7, &prompt), 96);
    // Blocks said to be cached that are not stop the import.
    let mut c = consumer(16);
    assert!(
        c.sched
            .import_blocks(&pin.tokens, &pin.keys, None, 1)
            .is_empty()
    );
    assert_clean(&c.sched);
}

/// A request held while its blocks are read from disk waits, and the requests behind it keep
/// their places behind it, while running requests go on; once released it starts from the
/// blocks that came in.
#[test]
fn a_held_request_waits_for_its_blocks_while_running_ones_go_on() {
    let prompt = tokens(6, 100);
    let p = producer(&prompt);
    let pin = p.sched.pinned(1).unwrap().clone();
    let mut c = consumer(16);
    c.sched.add_request(req(8, tokens(9, 20), 6)).unwrap();
    c.step().unwrap();
    let held = req(7, prompt.clone(), 6);
    let expected = reference_output(&held, c.sched.max_len()).0;
    c.sched.add_request(held).unwrap();
    c.sched.add_request(req(10, tokens(11, 20), 2)).unwrap();
    assert!(c.sched.hold(7));
    assert!(!c.sched.hold(8), "a running request is not held");
    assert!(!c.sched.hold(99), "an unknown request is not held");
    c.sched.check_invariants().unwrap();
    for _ in 0..3 {
        let (step, _) = c.step().unwrap();
        assert_eq!(step.summary(), [(8, 1)], "only the running request");
    }
    let before = c
        .sched
        .waiting_heads(8)
        .iter()
        .map(|h| (h.id, h.cached_blocks))
        .collect::<Vec<_>>();
    assert_eq!(before, [(7, 0), (10, 0)]);
    assert_eq!(transfer(&p, &mut c, &pin.keys, None), 6);
    let heads = c.sched.waiting_heads(1);
    assert_eq!(
        (heads[0].id, heads[0].keys, heads[0].cached_blocks),
        (7, &pin.keys[..], 6)
    );
    c.sched.release(7);
    c.run_to_completion(100);
    assert_eq!(c.outputs[&7], expected);
    assert_eq!(c.finished[&7].1, 96, "it started from the blocks read in");
    assert!(c.finished.contains_key(&10));
    // Held, then aborted: gone, with nothing held.
    c.sched.add_request(req(9, tokens(10, 30), 2)).unwrap();
    assert!(c.sched.hold(9));
    c.sched.abort(9);
    c.sched.release(9);
    assert!(!c.sched.has_unfinished());
    assert_clean(&c.sched);
}
