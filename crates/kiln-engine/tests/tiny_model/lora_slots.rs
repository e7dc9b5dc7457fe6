//! LoRA adapters loaded and unloaded while the engine runs, and more of them than the runner
//! has slots: requests through them take turns, each adapter written into a slot no running
//! request needs, and every request still gives its merged model's tokens.

use std::sync::Arc;

use kiln_engine::LoraCapacity;
use kiln_model::testing::LLAMA_PROJECTIONS;
use kiln_model::{LoraAdapter, Model};

use super::lora::{adapters, assert_close, llama_with_adapters};
use super::*;

/// Two adapters given at build with one slot, and requests through each and through none
/// added at once: the first adapter's requests run beside the base model's while the
/// second's wait (one slot), then the second is loaded into the slot; each request gives
/// what its model gives alone. With `max_cpu_loras` 1 the same requests give the same tokens,
/// the adapters letting go of their values when no request needs them and read again from
/// their files when one does; an adapter whose file changed meanwhile is refused.
#[test]
fn more_adapters_than_slots_take_turns() {
    let ctx = gpu();
    let dir = tempfile::tempdir().unwrap();
    let (mc, base, loaded, merged) = llama_with_adapters(dir.path());
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
        let room = |lora: &[Arc<LoraAdapter>], max_cpu_loras| EngineConfig {
            lora: lora.to_vec(),
            lora_capacity: Some(LoraCapacity { slots: 1, rank: 5 }),
            max_cpu_loras,
            ..ec()
        };
        let refs = |e: &kiln_engine::Engine| ["a0", "a1"].map(|n| e.lora_ref(n).expect("loaded"));
        // Every prompt at once, each through its adapter: each gives its model's tokens.
        let all_at_once = |e: &mut kiln_engine::Engine, label: &str| {
            let refs = refs(e);
            let reqs = (prompts.iter().enumerate())
                .map(|(i, p)| Request {
                    lora: (i % 3).checked_sub(1).map(|k| refs[k]),
                    ..request(i as u64, p.clone(), 6)
                })
                .collect();
            let got = run(e, reqs);
            for (i, w) in want.iter().enumerate() {
                assert_close(&what(&format!("{label} {i}")), &got[&(i as u64)], w, 0.002);
            }
        };
        let mut e = engine(&ctx, &base, room(&loaded, None));
        all_at_once(&mut e, "request");
        // a0 sat in the slot from the start; a1 was loaded into it once a0's requests were
        // done.
        assert_eq!(e.stats().lora_loads, 1, "{}", what("loads"));

        // At most one adapter's values held (adapters of their own, read from the files).
        let fresh: Vec<_> = (loaded.iter())
            .map(|a| Arc::new(LoraAdapter::load(&a.name, &a.path, &mc).unwrap()))
            .collect();
        let held = |e: &kiln_engine::Engine| {
            let adapters = e.lora_adapters().iter().flatten();
            adapters.map(|a| a.is_held()).collect::<Vec<_>>()
        };
        let mut e = engine(&ctx, &base, room(&fresh, Some(1)));
        let first_held = what("the first listed stays held");
        assert_eq!(held(&e), [true, false], "{first_held}");
        all_at_once(&mut e, "held");
        assert_eq!(e.stats().lora_reads, 1, "{}", what("a1 read again"));
        // Both had requests at once; the next request lets go of the other one.
        let through = |e: &mut kiln_engine::Engine, k: usize, id: u64| {
            let r = Request {
                lora: Some(refs(e)[k]),
                ..request(id, prompts[k + 1].clone(), 6)
            };
            run(e, vec![r]).remove(&id).unwrap()
        };
        assert_close(&what("a1 alone"), &through(&mut e, 1, 10), &want[2], 0.002);
        assert_eq!(held(&e), [false, true], "{}", what("a0 let go"));
        assert_close(&what("a0 again"), &through(&mut e, 0, 11), &want[1], 0.002);
        assert_eq!(held(&e), [true, false], "{}", what("a1 let go"));
        assert_eq!(e.stats().lora_reads, 2, "{}", what("a0 read again"));

        // An adapter whose file changed after it let go of its values is refused.
        let copy = dir.path().join(format!("copy {kernels:?}"));
        std::fs::create_dir_all(&copy).unwrap();
        for f in ["adapter_config.json", "adapter_model.safetensors"] {
            std::fs::copy(fresh[0].path.join(f), copy.join(f)).unwrap();
        }
        let moved = Arc::new(LoraAdapter::load("moved", &copy, &mc).unwrap());
        e.load_lora(moved.clone()).unwrap();
        assert!(moved.let_go());
        let weights = copy.join("adapter_model.safetensors");
        let mut bytes = std::fs::read(&weights).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x40;
        std::fs::write(&weights, bytes).unwrap();
        let r = Request {
            lora: e.lora_ref("moved"),
            ..request(12, prompts[1].clone(), 6)
        };
        let err = e.add_request(r).unwrap_err().to_string();
        assert!(err.contains("changed since it was loaded"), "{err}");
    }
}

/// Adapters loaded into an engine with room for two while it runs, unloaded (not while a
/// request runs through one), loaded again under the freed id, and a third beside two,
/// which takes the slot of the one used least recently: each request gives its merged model's
/// tokens, and the base model's with none.
#[test]
fn adapters_load_and_unload_while_the_engine_runs() {
    use kiln_engine::LoraCapacity;
    let ctx = gpu();
    let dir = tempfile::tempdir().unwrap();
    let (mc, base, loaded, merged) = llama_with_adapters(dir.path());
    let tiny = adapters([&LLAMA_PROJECTIONS, &["q_proj", "v_proj"]]);
    let prompt = tokens(6, 30, mc.vocab_size);
    for kernels in FAMILIES {
        let ec = || on(config(64, true), kernels, KvDtype::F32);
        let what = |s: &str| format!("{kernels:?}: {s}");
        let alone = |m: &Model| {
            let mut e = engine(&ctx, m, ec());
            run(&mut e, vec![request(1, prompt.clone(), 6)])
                .remove(&1)
                .unwrap()
        };
        let want_base = alone(&base);
        let want: Vec<_> = merged.iter().map(alone).collect();

        // Without room, nothing loads.
        let mut fixed = engine(&ctx, &base, ec());
        let err = fixed.load_lora(loaded[0].clone()).unwrap_err().to_string();
        assert!(err.contains("without room"), "{err}");

        let capacity = LoraCapacity { slots: 2, rank: 5 };
        let mut e = engine(
            &ctx,
            &base,
            EngineConfig {
                lora_capacity: Some(capacity),
                ..ec()
            },
        );
        let mut id = 10;
        let mut through = |e: &mut kiln_engine::Engine, name: Option<&str>| {
            id += 1;
            let lora = name.map(|n| e.lora_ref(n).expect("loaded"));
            let r = Request {
                lora,
                ..request(id, prompt.clone(), 6)
            };
            run(e, vec![r]).remove(&id).unwrap()
        };
        assert_close(
            &what("base, room for adapters"),
            &through(&mut e, None),
            &want_base,
            0.002,
        );
        assert_eq!(e.load_lora(loaded[1].clone()).unwrap(), 0);
        assert_eq!(e.load_lora(loaded[0].clone()).unwrap(), 1);
        assert_close(
            &what("a0 loaded"),
            &through(&mut e, Some("a0")),
            &want[0],
            0.002,
        );
        assert_close(
            &what("a1 loaded"),
            &through(&mut e, Some("a1")),
            &want[1],
            0.002,
        );
        let err = e.load_lora(loaded[0].clone()).unwrap_err().to_string();
        assert!(err.contains("already loaded"), "{err}");

        // Not while a request waits through it.
        let a1 = e.lora_ref("a1").unwrap();
        e.add_request(Request {
            lora: Some(a1),
            ..request(99, prompt.clone(), 2)
        })
        .unwrap();
        let err = e.unload_lora("a1").unwrap_err().to_string();
        assert!(err.contains("in use by 1"), "{err}");
        let err = e.replace_lora(loaded[1].clone()).unwrap_err().to_string();
        assert!(err.contains("in use by 1"), "{err}");
        while e.has_unfinished() {
            pollster::block_on(e.step()).unwrap();
        }
        assert_eq!(e.unload_lora("a1").unwrap(), 0);
        let stale = Request {
            lora: Some(a1),
            ..request(98, prompt.clone(), 2)
        };
        assert!(
            e.add_request(stale).is_err(),
            "{}",
            what("a request through an unloaded adapter")
        );
        // Id 0 again, for another adapter, into the slot a1 left; a0 untouched.
        let third = Arc::new(loaded[0].renamed("a0 again"));
        assert_eq!(e.load_lora(third).unwrap(), 0);
        assert_close(
            &what("a0 again"),
            &through(&mut e, Some("a0 again")),
            &want[0],
            0.002,
        );
        assert_close(
            &what("a0 still"),
            &through(&mut e, Some("a0")),
            &want[0],
            0.002,
        );
        assert_close(
            &what("base at the end"),
            &through(&mut e, None),
            &want_base,
            0.002,
        );
        // A third adapter: into the slot of "a0 again", used before a0 was last.
        let a1_again = Arc::new(loaded[1].renamed("a1 again"));
        assert_eq!(e.load_lora(a1_again).unwrap(), 2);
        assert_close(
            &what("a1 again, a third adapter"),
            &through(&mut e, Some("a1 again")),
            &want[1],
            0.002,
        );
        assert_close(
            &what("a0 after it"),
            &through(&mut e, Some("a0")),
            &want[0],
            0.002,
        );
        // a0, a1, "a0 again", "a1 again": each loaded once, when first used.
        assert_eq!(e.stats().lora_loads, 4, "{}", what("loads"));
        // Ranks beyond the room: refused, the id left empty.
        e.unload_lora("a0 again").unwrap();
        let wide = dir.path().join(format!("wide {kernels:?}"));
        let mut big = tiny[0].clone();
        big.rank = 9;
        big.write(&wide, &mc, DType::F32).unwrap();
        let big = Arc::new(LoraAdapter::load("big", &wide, &base.config).unwrap());
        let err = e.load_lora(big).unwrap_err().to_string();
        assert!(err.contains("LoRA rank"), "{err}");
        assert!(e.lora_adapters()[0].is_none());
    }
}
