//! The disk tier: a prompt's blocks written by one engine come back into a fresh engine's CPU
//! tier from the files (those after the blocks it computed itself), and its request then gives the same tokens and log-probs as an engine
//! that computes everything; another cache salt or another KV layout finds nothing.

use kiln_engine::Engine;
use kiln_engine::disk_tier::{DiskTier, DiskTierConfig};

use super::*;

fn disk_engine(ctx: &kiln_gpu::GpuContext, model: &Model, ec: EngineConfig) -> Engine {
    let per_block = KvLayout::for_model(&model.config, ec.kv_dtype).bytes_per_block();
    let mut e = engine(
        ctx,
        model,
        EngineConfig {
            cpu_kv_bytes: 16 * per_block,
            ..ec
        },
    );
    e.enable_kv_events();
    e
}

/// Saves every block the engine has announced.
fn save_all(tier: &mut DiskTier, e: &mut Engine) {
    tier.note(&e.take_kv_events());
    while tier.stats().pending > 0 {
        pollster::block_on(tier.save(e, 2)).unwrap();
    }
}

#[test]
fn blocks_saved_by_one_engine_serve_the_next() {
    for (family, dtype) in [
        (KernelFamily::Gpu, KvDtype::F16),
        (KernelFamily::Cpu, KvDtype::F32),
    ] {
        let what = format!("kernels {family} kv {dtype}");
        let (_model_dir, model) = tiny(&TinyConfig::qwen2(), 11);
        let ctx = gpu();
        let vocab = model.config.vocab_size;
        let first = tokens(400, 3 * BLOCK_SIZE + 6, vocab); // 3 full blocks
        let again = [&first[..], &tokens(401, 10, vocab)[..]].concat();
        let dir = tempfile::tempdir().unwrap();
        let cfg = DiskTierConfig {
            dir: dir.path().to_path_buf(),
            max_bytes: 1 << 30,
            model_id: "tiny".into(),
        };
        let ec = on(config(32, true), family, dtype);

        let mut writer = disk_engine(&ctx, &model, ec.clone());
        let mut tier = DiskTier::open(&cfg, &writer).unwrap();
        run(&mut writer, vec![request(1, first.clone(), 4)]);
        save_all(&mut tier, &mut writer);
        let written = tier.stats().blocks_written;
        assert!(written >= 3, "{what}: {:?}", tier.stats());
        drop(writer);

        let mut reader = disk_engine(&ctx, &model, ec.clone());
        let mut tier = DiskTier::open(&cfg, &reader).unwrap();
        assert_eq!(tier.stats().blocks_resident as u64, written, "{what}");
        let salted = tier.restore(&mut reader, &again, Some("tenant")).unwrap();
        assert_eq!(
            salted, 0,
            "{what}: another cache salt's keys are not on disk"
        );
        // The first two blocks computed here; the third comes from disk after them.
        run(
            &mut reader,
            vec![request(5, first[..2 * BLOCK_SIZE + 5].to_vec(), 1)],
        );
        // The request waits at the head of the queue: it is held while its blocks are
        // read, then they come back before it is admitted.
        reader.add_request(request(2, again.clone(), 6)).unwrap();
        let jobs = tier.plan_reads(&mut reader);
        assert_eq!(jobs.len(), 1, "{what}");
        assert!(
            tier.plan_reads(&mut reader).is_empty(),
            "{what}: being read"
        );
        pollster::block_on(reader.step()).unwrap();
        assert_eq!(
            reader.scheduler().blocks_of(2),
            Some(&[][..]),
            "{what}: held"
        );
        let loaded = tier.files().read_job(jobs.into_iter().next().unwrap());
        assert_eq!(loaded.len(), 1, "{what}");
        tier.loaded(loaded);
        assert_eq!(tier.import_loaded(&mut reader).unwrap(), 1, "{what}");
        assert_eq!(
            tier.restore(&mut reader, &again, None).unwrap(),
            0,
            "{what}: blocks cached in memory are not read again"
        );
        let mut got = Vec::new();
        while reader.has_unfinished() {
            for u in pollster::block_on(reader.step()).unwrap() {
                got.extend(u.token);
            }
        }
        let s = reader.stats();
        assert_eq!(s.cpu_blocks_restored, 1, "{what}: {s:?}");
        assert_eq!(s.prefix_cache_hits, 3 * BLOCK_SIZE as u64, "{what}: {s:?}");

        let mut fresh = engine(&ctx, &model, on(config(32, false), family, dtype));
        let want = run(&mut fresh, vec![request(2, again, 6)])
            .remove(&2)
            .unwrap();
        assert_same(&format!("{what}: restored from disk"), &got, &want);

        let other = match dtype {
            KvDtype::F16 => KvDtype::F32,
            _ => KvDtype::F16,
        };
        let e = disk_engine(&ctx, &model, on(config(32, true), family, other));
        let elsewhere = DiskTier::open(&cfg, &e).unwrap();
        assert_ne!(elsewhere.dir(), tier.dir(), "{what}");
        assert_eq!(elsewhere.stats().blocks_resident, 0, "{what}");
    }
}

/// Under memory pressure: a prompt's blocks pushed from the GPU to a CPU tier of 2 blocks and
/// out of it again are handed over with the bytes they had on the GPU, their keys, parents and
/// tokens, for the disk to keep.
#[test]
fn blocks_the_cpu_tier_drops_are_handed_over_with_their_bytes() {
    let (_model_dir, model) = tiny(&TinyConfig::qwen2(), 12);
    let ctx = gpu();
    let vocab = model.config.vocab_size;
    let per_block = KvLayout::for_model(&model.config, KvDtype::F16).bytes_per_block();
    let mut e = engine(
        &ctx,
        &model,
        EngineConfig {
            cpu_kv_bytes: 2 * per_block,
            ..on(config(8, true), KernelFamily::Gpu, KvDtype::F16)
        },
    );
    e.enable_spill();
    let first = tokens(500, 3 * BLOCK_SIZE + 6, vocab);
    run(&mut e, vec![request(1, first.clone(), 4)]);
    let keys = kiln_scheduler::prefix_keys(&first, None);
    let (on_gpu, later) = pollster::block_on(e.read_cached(&keys)).unwrap();
    assert!(later.is_empty());
    assert_eq!(on_gpu.len(), 3);
    assert!(e.take_spilled().is_empty(), "nothing dropped yet");
    // Two prompts that need the whole pool: the first's blocks go to the CPU tier, then out.
    for (i, salt) in [(2, 501), (3, 502)] {
        run(
            &mut e,
            vec![request(i, tokens(salt, 8 * BLOCK_SIZE - 4, vocab), 4)],
        );
    }
    let spilled = e.take_spilled();
    for want in &on_gpu {
        let got = spilled.iter().find(|b| b.key == want.key);
        assert_eq!(got, Some(want), "block {:x}", want.key);
    }
    assert_eq!(on_gpu[1].parent, Some(keys[0]));
    assert_eq!(on_gpu[2].tokens[..], first[2 * BLOCK_SIZE..3 * BLOCK_SIZE]);
    assert!(e.take_spilled().is_empty(), "handed over once");
}
