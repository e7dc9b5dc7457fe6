//! No silent clamps: a `max_model_len` above the model's context or above what the KV pool
//! holds stops the engine with both numbers; without one, the engine takes the smaller of the
//! two. The scheduler learns the runner's penalty-entry capacity.

mod common;

use common::gpu;
use kiln_engine::{Engine, EngineConfig, KvSize};
use kiln_model::Model;
use kiln_model::testing::{TinyConfig, write_tiny_llama};

fn build(max_model_len: Option<usize>, blocks: usize) -> Result<Engine, String> {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_llama(dir.path(), &TinyConfig::default(), 3).unwrap();
    let model = Model::load(dir.path()).unwrap();
    let ec = EngineConfig {
        max_num_batched_tokens: 64,
        max_num_seqs: 4,
        kv: KvSize::Blocks(blocks),
        max_model_len,
        ..EngineConfig::default()
    };
    Engine::new(&gpu(), &model.config, &model.weights, ec, &mut |_, _| {})
        .map_err(|e| e.to_string())
}

#[test]
fn max_model_len_is_checked_never_shrunk() {
    // 16 blocks of 16 tokens = 256 tokens; the tiny model's context is 512.
    let e = build(Some(300), 16)
        .err()
        .expect("300 tokens cannot fit 256");
    assert!(
        e.contains("300") && e.contains("256") && e.contains("16 blocks"),
        "{e}"
    );
    let e = build(Some(1000), 128)
        .err()
        .expect("1000 is above the model's context");
    assert!(e.contains("1000") && e.contains("512"), "{e}");
    assert_eq!(build(Some(256), 16).unwrap().max_len(), 256);
    assert_eq!(build(None, 16).unwrap().max_len(), 256);
    let e = build(None, 64).unwrap();
    assert_eq!(e.max_len(), 512);
    let cap = e.scheduler().config().max_penalty_entries;
    assert_eq!(
        cap,
        e.runner_config().max_seqs * 512,
        "the runner's penalty buffer"
    );
}
