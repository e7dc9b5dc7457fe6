//! No silent clamps: a `max_model_len` above the model's context or above what the KV pool
//! holds stops the engine with both numbers; without one, the engine takes the smaller of the
//! two. A share of device memory gives the KV pool what the rest leaves of it. The scheduler
//! learns the runner's penalty pool. The runner refuses block-table and
//! penalty-list writes that would leave a row short of what it sent before.

mod common;

use std::sync::atomic::Ordering;

use common::{chunk, gpu};
use kiln_core::{PENALTY_PAGE, PenaltyToken, PenaltyWrites, StepBatch};
use kiln_engine::{Engine, EngineConfig, KvSize};
use kiln_gpu::GpuContext;
use kiln_model::Model;
use kiln_model::testing::{TinyConfig, write_tiny_llama};

fn build(max_model_len: Option<usize>, blocks: usize) -> Result<Engine, String> {
    build_with(max_model_len, KvSize::Blocks(blocks))
}

fn build_with(max_model_len: Option<usize>, kv: KvSize) -> Result<Engine, String> {
    build_on(&gpu(), max_model_len, kv)
}

fn build_on(ctx: &GpuContext, max_model_len: Option<usize>, kv: KvSize) -> Result<Engine, String> {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_llama(dir.path(), &TinyConfig::default(), 3).unwrap();
    let model = Model::load(dir.path()).unwrap();
    let ec = EngineConfig {
        max_num_batched_tokens: 64,
        max_num_seqs: 4,
        kv,
        max_model_len,
        ..EngineConfig::default()
    };
    Engine::new(ctx, &model.config, &model.weights, ec, &mut |_, _| {}).map_err(|e| e.to_string())
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
        (e.runner_config().max_seqs * 512).next_multiple_of(kiln_core::PENALTY_PAGE),
        "the runner's penalty pool"
    );
}

#[test]
fn block_table_writes_that_skip_entries_are_refused() {
    let mut engine = build(None, 16).unwrap();
    let runner = engine.runner();
    let table: Vec<u32> = (0..4).collect();
    // A row that holds nothing cannot be written from entry 1.
    let mut batch = chunk(&[5; 20], 0, &table);
    batch.seqs[0].table_from = 1;
    batch.seqs[0].table_tail.remove(0);
    let e = pollster::block_on(runner.step(&batch)).expect_err("a gap");
    assert!(e.to_string().contains("row 0 from entry 1"), "{e}");
    // Written whole, the row holds two entries; the next step may send none of them, or
    // the third from entry 2, but not from entry 3.
    pollster::block_on(runner.step(&chunk(&[5; 20], 0, &table))).unwrap();
    let mut next = chunk(&[6], 20, &table);
    next.seqs[0].table_from = 2;
    next.seqs[0].table_tail.clear();
    pollster::block_on(runner.step(&next)).unwrap();
    let mut next = chunk(&[7; 20], 21, &table);
    next.seqs[0].table_from = 3;
    next.seqs[0].table_tail = vec![3];
    let e = pollster::block_on(runner.step(&next)).expect_err("a gap");
    assert!(e.to_string().contains("holds 2"), "{e}");
    // Another row is empty: a sequence moved there without its table is refused.
    let mut moved = chunk(&[6], 20, &table);
    moved.seqs[0].table_row = 1;
    moved.seqs[0].table_from = 2;
    moved.seqs[0].table_tail.clear();
    let e = pollster::block_on(runner.step(&moved)).expect_err("an empty row");
    assert!(
        e.to_string().contains("row 1 from entry 2, but it holds 0"),
        "{e}"
    );
}

#[test]
fn penalty_list_writes_that_skip_entries_are_refused() {
    let mut engine = build(None, 16).unwrap();
    let runner = engine.runner();
    let table: Vec<u32> = (0..4).collect();
    let entry = |token_id| PenaltyToken {
        token_id,
        output_count: 1,
        seen: true,
        bias: 0.0,
    };
    let list: Vec<PenaltyToken> = (0..PENALTY_PAGE as u32 + 5).map(entry).collect();
    let with = |mut b: StepBatch, w: PenaltyWrites| {
        let spec = b.seqs[0].sample.as_mut().unwrap();
        spec.params.repetition_penalty = 1.2;
        spec.penalties = w;
        b
    };
    let mut step = |b: &StepBatch| pollster::block_on(runner.step(b));
    // A list that grows by pages it never had.
    let gap = PenaltyWrites {
        pages_from: 1,
        ..PenaltyWrites::whole(&list[..3], 0)
    };
    let e = step(&with(chunk(&[5; 20], 0, &table), gap)).expect_err("a page gap");
    assert!(
        e.to_string()
            .contains("pages written from 1, but the row holds 0"),
        "{e}"
    );
    // A page outside the pool.
    let far = PenaltyWrites::whole(&list, 1 << 30);
    let e = step(&with(chunk(&[5; 20], 0, &table), far)).expect_err("a page past the pool");
    assert!(e.to_string().contains("past the pool"), "{e}");
    // Written whole (two pages), the list may then grow by written entries only.
    step(&with(
        chunk(&[5; 20], 0, &table),
        PenaltyWrites::whole(&list, 0),
    ))
    .unwrap();
    let skip = PenaltyWrites {
        len: list.len() as u32 + 2,
        pages_from: 2,
        pages: Vec::new(),
        entries: vec![(list.len() as u32 + 1, entry(900))],
    };
    let e = step(&with(chunk(&[6], 20, &table), skip)).expect_err("an entry skipped");
    assert!(e.to_string().contains("are not all written"), "{e}");
    let grow = PenaltyWrites {
        len: list.len() as u32 + 1,
        pages_from: 2,
        pages: Vec::new(),
        entries: vec![(3, entry(3)), (list.len() as u32, entry(900))],
    };
    step(&with(chunk(&[6], 20, &table), grow)).unwrap();
}

#[test]
fn a_share_of_device_memory_sizes_the_pool_from_what_the_rest_leaves() {
    let ctx = gpu();
    let memory = ctx
        .device_memory()
        .expect("the test device (Vulkan) reports its memory");
    let total = memory.total;
    // What the engine takes with a pool of 8 blocks, and one block's bytes.
    let made = |kv| {
        let before = ctx.allocated.load(Ordering::Relaxed);
        let e = build_on(&ctx, None, kv);
        (e, ctx.allocated.load(Ordering::Relaxed) - before)
    };
    // (The second time: the first also makes the device's shared placeholders.)
    let _ = made(KvSize::Blocks(8));
    let (e, eight) = made(KvSize::Blocks(8));
    let block = e.unwrap().kv_layout().bytes_per_block();
    // A share of four times that: what the engine takes but its KV pool.
    let share = |bytes: u64| KvSize::DeviceShare(bytes as f64 / total as f64);
    let (e, used) = made(share(4 * eight));
    let mut e = e.unwrap();
    assert_eq!(e.runner().gpu_bytes, used);
    assert!(used <= 4 * eight, "{used} of {}", 4 * eight);
    let rest = used - e.runner_config().num_blocks as u64 * block;
    // That, and 20.5 blocks: 20 blocks, within the budget.
    let budget = rest + 20 * block + block / 2;
    let (e, used) = made(share(budget));
    let e = e.unwrap();
    let n = e.runner_config().num_blocks;
    assert_eq!((n, used), (20, rest + 20 * block), "of {budget}");
    assert_eq!(
        e.max_len(),
        20 * 16,
        "the longest sequence is what the pool holds"
    );
    // Too small a share for one block, or no share at all, is refused with the numbers.
    let (e, _) = made(KvSize::DeviceShare(
        (eight - 7 * block) as f64 / total as f64 * 0.9,
    ));
    let e = e.err().expect("no room for a block");
    assert!(
        e.contains("leaves no KV block") && e.contains("weights take"),
        "{e}"
    );
    // More than the device has free (where the driver tells it; this process already holds
    // some of it) is refused with both numbers: all of it.
    if memory.free.is_some() {
        let e = build_on(&ctx, None, KvSize::DeviceShare(1.0))
            .err()
            .expect("more than is free");
        assert!(e.contains("free") && e.contains(&total.to_string()), "{e}");
    }
    for bad in [0.0, -0.5, 1.5, f64::NAN] {
        let e = build_with(None, KvSize::DeviceShare(bad)).err().unwrap();
        assert!(e.contains("(0, 1]"), "{bad}: {e}");
    }
    // A max_model_len beyond the pool it leaves is refused, as with a pool in blocks.
    let e = build_with(Some(500), share(budget))
        .err()
        .expect("500 tokens in 20 blocks or fewer");
    assert!(
        e.contains("500") && e.contains("blocks of 16 tokens"),
        "{e}"
    );
}

/// With room for LoRA adapters (every projection's stacks of slots), a share of device memory
/// still bounds all the engine makes: the stacks are counted before the pool is sized.
#[test]
fn a_share_of_device_memory_counts_the_room_for_adapters() {
    let ctx = gpu();
    let total = (ctx.device_memory())
        .expect("the test device (Vulkan) reports its memory")
        .total;
    let dir = tempfile::tempdir().unwrap();
    write_tiny_llama(dir.path(), &TinyConfig::default(), 3).unwrap();
    let model = Model::load(dir.path()).unwrap();
    let made = |kv| {
        let before = ctx.allocated.load(Ordering::Relaxed);
        let ec = EngineConfig {
            max_num_batched_tokens: 64,
            max_num_seqs: 4,
            kv,
            lora_capacity: Some(kiln_engine::LoraCapacity { slots: 4, rank: 16 }),
            ..EngineConfig::default()
        };
        let e = Engine::new(&ctx, &model.config, &model.weights, ec, &mut |_, _| {}).unwrap();
        (e, ctx.allocated.load(Ordering::Relaxed) - before)
    };
    let _ = made(KvSize::Blocks(8));
    let (_, eight) = made(KvSize::Blocks(8));
    let budget = 4 * eight;
    let (e, used) = made(KvSize::DeviceShare(budget as f64 / total as f64));
    assert!(used <= budget, "{used} of {budget}");
    assert!(e.runner_config().num_blocks > 8, "the pool got the rest");
}
