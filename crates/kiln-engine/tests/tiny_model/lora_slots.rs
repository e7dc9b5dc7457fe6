//! More LoRA adapters than the runner has slots: requests through them take turns, each
//! adapter written into a slot no running request needs, and every request still gives its
//! merged model's tokens.

use std::sync::Arc;

use kiln_engine::LoraCapacity;
use kiln_model::testing::{LLAMA_PROJECTIONS, TinyConfig};
use kiln_model::{LoraAdapter, Model};

use super::lora::{adapters, assert_close, fixtures};
use super::*;

/// Two adapters given at build with one slot, and requests through each and through none
/// added at once: the first adapter's requests run beside the base model's while the
/// second's wait (one slot), then the second is loaded into the slot; each request gives
/// what its model gives alone. The adapters beyond `max_cpu_loras` are refused.
#[test]
fn more_adapters_than_slots_take_turns() {
    let ctx = gpu();
    let (cfg, seed) = (TinyConfig::default(), 7);
    let dir = tempfile::tempdir().unwrap();
    let base_dir = dir.path().join("base");
    let mc = write_tiny_llama(&base_dir, &cfg, seed).unwrap();
    let base = Model::load(&base_dir).unwrap();
    let tiny = adapters([&LLAMA_PROJECTIONS, &["q_proj", "v_proj"]]);
    let (loaded, merged) = fixtures(dir.path(), &cfg, seed, &tiny, &base);
    let prompts: Vec<Vec<u32>> = (0..6)
        .map(|i| tokens(20 + i, 12 + 5 * i as usize, mc.vocab_size))
        .collect();
    // Request i runs through adapter i % 3 - 1 (none for 0).
    let model_of = |i: usize| match i % 3 {
        0 => &base,
        k => &merged[k - 1],
    };
    for kernels in FAMILIES {
        let ec = || on(config(64, true), kernels, KvDtype::F32);
        let what = |s: &str| format!("{kernels:?}: {s}");
        let want: Vec<_> = (prompts.iter().enumerate())
            .map(|(i, p)| {
                let mut e = engine(&ctx, model_of(i), ec());
                run(&mut e, vec![request(1, p.clone(), 6)])
                    .remove(&1)
                    .unwrap()
            })
            .collect();
        let room = |max_cpu_loras| EngineConfig {
            lora: loaded.clone(),
            lora_capacity: Some(LoraCapacity { slots: 1, rank: 5 }),
            max_cpu_loras,
            ..ec()
        };
        let mut e = engine(&ctx, &base, room(None));
        let refs = ["a0", "a1"].map(|n| e.lora_ref(n).expect("loaded"));
        let reqs = (prompts.iter().enumerate())
            .map(|(i, p)| Request {
                lora: (i % 3).checked_sub(1).map(|k| refs[k]),
                ..request(i as u64, p.clone(), 6)
            })
            .collect();
        let got = run(&mut e, reqs);
        for (i, w) in want.iter().enumerate() {
            assert_close(&what(&format!("request {i}")), &got[&(i as u64)], w, 0.002);
        }
        // a0 sat in the slot from the start; a1 was loaded into it once a0's requests were
        // done.
        assert_eq!(e.stats().lora_loads, 1, "{}", what("loads"));

        // At most two adapters held: a third is refused, and so are three at build.
        let mut e = engine(&ctx, &base, room(Some(2)));
        let third = Arc::new(LoraAdapter {
            name: "a2".into(),
            ..(*loaded[0]).clone()
        });
        let err = e.load_lora(third.clone()).unwrap_err().to_string();
        assert!(err.contains("max_cpu_loras 2"), "{err}");
        e.unload_lora("a0").unwrap();
        assert_eq!(e.load_lora(third.clone()).unwrap(), 0);
        let three = EngineConfig {
            lora: [loaded.clone(), vec![third]].concat(),
            ..room(Some(2))
        };
        let built =
            kiln_engine::Engine::new(&ctx, &base.config, &base.weights, three, &mut |_, _| {});
        let err = built.err().expect("three adapters, two held").to_string();
        assert!(err.contains("max_cpu_loras 2"), "{err}");
    }
}
