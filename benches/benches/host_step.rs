//! The host's share of a decode step with many running sequences: the scheduler's `schedule`
//! and `update`, then the runner's upload of the batch and the recording of the forward pass
//! and sampling (the GPU's time is not in these figures: between timed steps the queued
//! uploads are landed by an empty submission, untimed). The goal: under
//! 1 ms with 256 sequences. The runner's part is measured on a model of SmolLM2-135M's depth
//! (30 layers, so the same dispatches per step) with tiny random weights; what it records does
//! not depend on the weights' size.
//! Also the prompt lookup a decode's guesses of its next tokens take (speculative decoding),
//! per sequence, where the history holds no earlier run of its last token (the whole scan).
//! Run: `WGPU_BACKEND=vulkan cargo bench -p kiln-benches --bench host_step`.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kiln_core::{
    BLOCK_SIZE, PENALTY_PAGE, PenaltyToken, PenaltyWrites, SampleSpec, SampledToken,
    SamplingParams, SeqInBatch, StepBatch,
};
use kiln_gpu::{KernelFamily, KvDtype, ModelRunner, RunnerConfig, WeightStorage};
use kiln_model::testing::{TinyConfig, write_tiny_llama};
use kiln_scheduler::{Request, Scheduler, SchedulerConfig, Speculation};

/// Steps a scheduler state is used for before it is rebuilt, so the context stays within
/// this many tokens of the nominal one.
const STEPS_PER_STATE: usize = 256;
const BUDGET: usize = 8192;
const CASES: [(usize, usize); 4] = [(1, 512), (64, 4096), (256, 512), (256, 4096)];
/// Cases whose requests also carry a repetition penalty over every token of their context
/// (each step sends the entries of their penalty lists that changed).
const PENALTY_CASES: [(usize, usize); 1] = [(256, 4096)];

/// `seqs` requests of `context` prompt tokens, prefilled, all decoding (with a repetition
/// penalty if `penalty`).
fn decoding(seqs: usize, context: usize, penalty: bool) -> Scheduler {
    // The first prompts decode while the last ones are prefilled: room for those tokens too.
    let room = context + STEPS_PER_STATE + seqs * context / BUDGET + 32;
    let mut s = Scheduler::new(SchedulerConfig {
        max_num_batched_tokens: BUDGET,
        max_num_seqs: seqs,
        num_gpu_blocks: seqs * room.div_ceil(BLOCK_SIZE),
        max_model_len: room,
        ..SchedulerConfig::default()
    });
    for id in 0..seqs as u64 {
        let prompt = (0..context as u32)
            .map(|i| (i * 7 + id as u32 * 131) % 50_000)
            .collect();
        let mut req = Request::new(id, prompt, room);
        req.ignore_eos = true;
        if penalty {
            req.sampling.repetition_penalty = 1.1;
        }
        s.add_request(req).unwrap();
    }
    loop {
        let step = s.schedule().expect("running requests");
        let sampled = tokens(step.seqs.iter().filter(|q| q.sampled).count());
        let decoding =
            step.seqs.len() == seqs && (step.seqs.iter()).all(|q| q.sampled && q.num_tokens == 1);
        s.update(step, &sampled);
        if decoding {
            return s;
        }
    }
}

fn tokens(n: usize) -> Vec<SampledToken> {
    let t = SampledToken {
        token_id: 7,
        logprob: None,
        top_logprobs: Vec::new(),
        rank: None,
        hidden: None,
    };
    vec![t; n]
}

fn scheduler(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler decode step");
    g.sample_size(20);
    let cases = (CASES.iter().map(|&c| (c, false))).chain(PENALTY_CASES.iter().map(|&c| (c, true)));
    for ((seqs, context), penalty) in cases {
        let sampled = tokens(seqs);
        let name = format!("{seqs} seqs, context {context}");
        let name = if penalty {
            name + ", repetition penalty"
        } else {
            name
        };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut s = decoding(seqs, context, penalty);
                let mut used = 0;
                for _ in 0..iters {
                    if used == STEPS_PER_STATE {
                        s = decoding(seqs, context, penalty);
                        used = 0;
                    }
                    let t = Instant::now();
                    let step = s.schedule().expect("running requests");
                    s.update(step, &sampled);
                    total += t.elapsed();
                    used += 1;
                }
                total
            })
        });
    }
    g.finish();
}

/// A decode batch: `seqs` sequences of `context` tokens, all reading the same blocks; with
/// `whole`, each sends its whole block table (as on its first step), else none (as on most
/// steps after it: a decode adds a block every 16 tokens); with `penalty`, each carries a
/// repetition penalty over `context` distinct tokens, its penalty list sent whole with
/// `whole`, else one entry of it (the count of the token the last step drew).
fn decode_batch(seqs: usize, context: usize, whole: bool, penalty: bool) -> StepBatch {
    let mut params = SamplingParams::greedy();
    let list: Vec<PenaltyToken> = (0..context as u32)
        .map(|token_id| PenaltyToken {
            token_id,
            output_count: 0,
            seen: true,
            bias: 0.0,
        })
        .collect();
    let pages = context.div_ceil(PENALTY_PAGE) as u32;
    let penalties = |row: u32| match (penalty, whole) {
        (false, _) => PenaltyWrites::default(),
        (true, true) => PenaltyWrites::whole(&list, row * pages),
        (true, false) => PenaltyWrites {
            len: context as u32,
            pages_from: pages,
            pages: Vec::new(),
            entries: vec![((context - 1) as u32, list[context - 1])],
        },
    };
    if penalty {
        params.repetition_penalty = 1.1;
    }
    let table: Vec<u32> = (0..context.div_ceil(BLOCK_SIZE) as u32).collect();
    let last = (context - 1) as u32;
    StepBatch {
        token_ids: vec![7; seqs],
        positions: vec![last; seqs],
        slot_mapping: vec![table[table.len() - 1] * BLOCK_SIZE as u32 + last % 16; seqs],
        seqs: (0..seqs as u32)
            .map(|i| SeqInBatch {
                query_start: i,
                query_len: 1,
                context_len: context as u32,
                table_row: i,
                table_from: if whole { 0 } else { table.len() as u32 },
                table_tail: if whole { table.clone() } else { Vec::new() },
                score: None,
                lora: None,
                drafts: 0,
                sample: Some(SampleSpec {
                    params,
                    seed: 0,
                    draw_index: 0,
                    penalties: penalties(i),
                }),
            })
            .collect(),
        ..StepBatch::default()
    }
}

fn runner(c: &mut Criterion) {
    let ctx = kiln_benches::gpu();
    let dir = tempfile::tempdir().unwrap();
    let tc = TinyConfig {
        num_layers: 30,
        max_position_embeddings: 4096,
        // SmolLM2's vocabulary, so that a penalty list may hold 4,096 distinct tokens.
        vocab_size: 49_152,
        ..TinyConfig::default()
    };
    write_tiny_llama(dir.path(), &tc, 7).unwrap();
    let model = kiln_model::Model::load(dir.path()).unwrap();
    let max_seqs = CASES.iter().map(|c| c.0).max().unwrap();
    let runner = ModelRunner::new(
        &ctx,
        &model.config,
        &model.weights,
        RunnerConfig {
            max_tokens: BUDGET,
            max_seqs,
            sampler_rows: max_seqs,
            num_blocks: 4096 / BLOCK_SIZE,
            memory_budget: None,
            num_cpu_blocks: 0,
            max_model_len: 4096,
            kernels: KernelFamily::Auto,
            kv_dtype: KvDtype::F16,
            weights: WeightStorage::Quantized,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let mut g = c.benchmark_group("runner upload and record");
    g.sample_size(20);
    let cases = (CASES
        .iter()
        .flat_map(|&c| [(c, true, false), (c, false, false)]))
    .chain((PENALTY_CASES.iter()).flat_map(|&c| [(c, true, true), (c, false, true)]));
    for ((seqs, context), whole, penalty) in cases {
        let batch = decode_batch(seqs, context, whole, penalty);
        let tables = if whole {
            "whole tables"
        } else {
            "tables unchanged"
        };
        let name = format!("{seqs} seqs, context {context}, 30 layers, {tables}");
        let name = match (penalty, whole) {
            (false, _) => name,
            (true, true) => name + ", penalty lists sent whole",
            (true, false) => name + ", penalty lists by difference",
        };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let recorded = runner.encode_step(&batch).unwrap();
                    total += t.elapsed();
                    // Untimed: the engine submits every step, which lands the queued uploads
                    // and recycles their staging memory. An empty submission does the same
                    // without running the (tiny model's, meaningless) forward pass.
                    drop(recorded);
                    ctx.queue.submit([]);
                    ctx.device
                        .poll(wgpu::PollType::wait_indefinitely())
                        .unwrap();
                }
                total
            })
        });
    }
    g.finish();
}

fn prompt_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("prompt lookup, one sequence");
    let lookup = Speculation {
        num_tokens: 5,
        lookup_min: 2,
        lookup_max: 4,
    };
    for context in [4096, 32768] {
        // Distinct tokens but the last, which occurs every 64 positions (a token the scan
        // finds often, followed by runs that never match).
        let mut history: Vec<u32> = (0..context as u32).map(|i| 1000 + i).collect();
        for i in (0..context).step_by(64) {
            history[i] = 7;
        }
        history[context - 1] = 7;
        g.bench_function(format!("context {context}, no match"), |b| {
            b.iter(|| {
                let guesses = lookup.propose(std::hint::black_box(&history), 5);
                assert!(guesses.is_empty());
            })
        });
    }
    g.finish();
}

criterion_group!(benches, scheduler, runner, prompt_lookup);
criterion_main!(benches);
