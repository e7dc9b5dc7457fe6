//! The warm-up an engine runs while it is built (its KV pool cleared, one step of one token
//! written to block 0 through block-table row 0) leaves nothing a request can see.

use super::*;

/// Requests that fill the whole pool, block 0 and table row 0 included, twice (the second
/// round from cached prefixes): an engine built with the warm-up gives the same tokens and
/// log-probabilities, bit for bit, as one built without. Reading block 0 before writing it
/// would differ, the cold engine's block holding zeros and the warm one's the warm-up's
/// token. The warm-up's step is seen to have run (the cold engine has recorded no step).
#[test]
fn warm_up_changes_no_output() {
    // Qwen3's heads are wide enough for the q8_0 cache.
    let (_dir, model) = tiny(&TinyConfig::qwen3(), 11);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let shared = tokens(500, 2 * BLOCK_SIZE, vocab);
    let reqs = || {
        [9usize, 30, 21, 40]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let own = tokens(600 + i as u64, n, vocab);
                let prompt = if i % 2 == 0 {
                    [&shared[..], &own].concat()
                } else {
                    own
                };
                request(i as u64, prompt, 12)
            })
            .collect::<Vec<_>>()
    };
    for family in FAMILIES {
        for kv in [KvDtype::F16, KvDtype::Q8] {
            let what = format!("kernels {family} kv {kv:?}");
            let built = |warm_up| {
                let ec = EngineConfig {
                    warm_up,
                    ..on(config(16, true), family, kv)
                };
                engine(&ctx, &model, ec)
            };
            let (mut cold, mut warm) = (built(false), built(true));
            assert_eq!(cold.runner().last_dispatches(), 0, "{what}");
            assert!(warm.runner().last_dispatches() > 0, "{what}");
            for round in 0..2 {
                let (a, b) = (run(&mut cold, reqs()), run(&mut warm, reqs()));
                assert_eq!(a, b, "{what} round {round}");
            }
            assert!(warm.stats().prefix_cache_hits > 0, "{what}");
        }
    }
}
