//! Kernel throughput at SmolLM2-135M and 1B-class shapes: matmul at prefill sizes, matvec at
//! decode sizes (GB/s of weights read), paged attention (decode at 512 and 4096 context and a
//! 512-token prefill, both kernel families), what a launch costs apart from its work, and the
//! device's buffer copy bandwidth.
//! Run: `WGPU_BACKEND=vulkan cargo bench -p kiln-benches`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kiln_benches::{gpu, run, step_buffer, values};
use kiln_gpu::ops::{self, AttentionBuffers, Matmul, MatmulArgs, OutputMap};
use kiln_gpu::{GpuContext, GpuMatrix, HostMatrix, Kernels, Recorded};
use kiln_model::DType;
use kiln_model::testing::quantize;

/// (name, input width K, outputs N)
const SHAPES: &[(&str, usize, usize)] = &[
    ("smollm2 gate_up", 576, 3072),
    ("smollm2 lm_head", 576, 49152),
    ("1b gate_up", 2048, 16384),
];

/// `y = x W^T` for `rows` rows of random `x`, on buffers of its own.
fn product(ctx: &GpuContext, k: &Kernels, w: &GpuMatrix, rows: usize) -> Matmul {
    let (n, kdim) = (w.rows, w.cols);
    let x = ctx.storage_init("x", bytemuck::cast_slice(&values(rows * kdim, 2, 1.0)));
    let y = ctx.storage("y", (rows * n * 4) as u64);
    let step = step_buffer(ctx, rows as u32, 1, 0);
    Matmul::new(
        ctx,
        k,
        &step,
        MatmulArgs {
            x: &x,
            w,
            bias: None,
            y: &y,
            ldy: n as u32,
            out_offset: 0,
            norm: None,
            accumulate: false,
            sample_rows: false,
            map: OutputMap::Identity,
            pairs: None,
        },
    )
    .expect("matmul")
}

fn matmul(c: &mut Criterion) {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut g = c.benchmark_group("matmul");
    g.sample_size(10);
    for &(name, kdim, n) in SHAPES {
        let w = GpuMatrix::upload(&ctx, "w", &values(n * kdim, 1, 0.1), n, kdim).unwrap();
        for rows in [1usize, 4, 128, 512] {
            if rows == 512 && n > 16384 {
                continue;
            }
            let mm = product(&ctx, &k, &w, rows);
            if rows <= 8 {
                g.throughput(Throughput::Bytes(w.bytes()));
            } else {
                g.throughput(Throughput::Elements((2 * rows * kdim * n) as u64));
            }
            g.bench_function(format!("{name} rows={rows}"), |b| {
                b.iter(|| {
                    run(&ctx, 1, &|p| {
                        mm.record(p, rows as u32, 0);
                    })
                })
            });
        }
    }
}

/// Steps of one row (decode: GiB/s of weight bytes read) and of many (16 decoding sequences, a
/// 128-token prefill chunk: multiply-adds per second) through the gate/up matrix kept in each
/// format the default model's file uses, against the same matrix in f16. On a CPU adapter with
/// subgroups, both row-wise families (the subgroup kernel, and the plain ones).
fn matmul_formats(c: &mut Criterion) {
    let ctx = gpu();
    let mut variants = vec![("", Kernels::new(&ctx))];
    if variants[0].1.rowwise_subgroups {
        let mut plain = Kernels::new(&ctx);
        plain.rowwise_subgroups = false;
        variants.push((" plain", plain));
    }
    let mut g = c.benchmark_group("matmul formats");
    g.sample_size(10);
    let (name, kdim, n) = SHAPES[0];
    let data = values(n * kdim, 1, 0.1);
    for dtype in [DType::F16, DType::Q4_1, DType::Q8_0] {
        let host = HostMatrix::from_stored(dtype, quantize(dtype, &data), n, kdim).unwrap();
        let w = GpuMatrix::upload_host(&ctx, "w", &host).unwrap();
        for ((tile, k), rows) in variants
            .iter()
            .flat_map(|v| [(v, 1), (v, 16usize), (v, 128)])
        {
            let mm = product(&ctx, k, &w, rows);
            g.throughput(if rows == 1 {
                Throughput::Bytes(w.bytes())
            } else {
                Throughput::Elements((2 * rows * kdim * n) as u64)
            });
            g.bench_function(format!("{name} {dtype:?} rows={rows}{tile}"), |b| {
                b.iter(|| {
                    run(&ctx, 1, &|p| {
                        mm.record(p, rows as u32, 0);
                    })
                })
            });
        }
    }
}

/// Paged attention at SmolLM2's shape (9 heads over 3 KV heads of 64), with each kernel
/// family, over an f16 cache: decode rows of 1 and 8 sequences at 512 and 4096 tokens of
/// context (split context on the GPU family), and a 512-token prompt prefilled in one chunk
/// (query tiles on the GPU family). Throughput: the K/V bytes the step's tokens attend to,
/// once per sequence.
fn attention(c: &mut Criterion) {
    let ctx = gpu();
    let mut g = c.benchmark_group("attention");
    g.sample_size(10);
    let (nh, nkv, d) = (9usize, 3usize, 64usize);
    // (what, sequences, query tokens per sequence, context length)
    let cases = [
        ("decode 1 seq ctx=512", 1usize, 1usize, 512usize),
        ("decode 8 seqs ctx=512", 8, 1, 512),
        ("decode 8 seqs ctx=4096", 8, 1, 4096),
        ("prefill 512", 1, 512, 512),
    ];
    for (family, rowwise) in [("cpu", true), ("gpu", false)] {
        let k = Kernels::with_rowwise(&ctx, rowwise);
        for (what, seqs, q, ctx_len) in cases {
            let bs = kiln_core::BLOCK_SIZE;
            let blocks_per_seq = ctx_len.div_ceil(bs);
            let slots = seqs * blocks_per_seq * bs;
            let tokens = seqs * q;
            let kv = |n: usize, seed: u32| {
                let layout = kiln_gpu::KvLayout::new(1, nkv, d, kiln_gpu::KvDtype::F16);
                let halves = layout.encode(&values(n, seed, 1.0));
                ctx.storage_init("kv", bytemuck::cast_slice(&halves))
            };
            let (kc, vc) = (kv(slots * nkv * d, 3), kv(slots * nkv * d, 4));
            let qkv = ctx.storage_init(
                "qkv",
                bytemuck::cast_slice(&values(tokens * (nh + 2 * nkv) * d, 5, 1.0)),
            );
            let positions: Vec<u32> = (0..seqs)
                .flat_map(|_| (ctx_len - q..ctx_len).map(|p| p as u32))
                .collect();
            let token_seq: Vec<u32> = (0..seqs as u32).flat_map(|s| vec![s; q]).collect();
            let seq_info: Vec<u32> = (0..seqs as u32)
                .flat_map(|s| {
                    let first = s * q as u32;
                    [first, q as u32, ctx_len as u32, s * blocks_per_seq as u32]
                })
                .collect();
            let tables: Vec<u32> = (0..(seqs * blocks_per_seq) as u32).collect();
            let u = |v: &[u32]| ctx.storage_init("u32", bytemuck::cast_slice(v));
            let (pb, tb, sb, bt) = (u(&positions), u(&token_seq), u(&seq_info), u(&tables));
            let out = ctx.storage("out", (tokens * nh * d * 4) as u64);
            let step = step_buffer(&ctx, tokens as u32, seqs as u32, 0);
            let l = ops::attention(
                &ctx,
                &k,
                &step,
                (nh, nkv, d),
                ops::Scores {
                    scale: 1.0 / (d as f32).sqrt(),
                    ..Default::default()
                },
                kiln_gpu::KvDtype::F16,
                AttentionBuffers {
                    positions: &pb,
                    token_seq: &tb,
                    seq_info: &sb,
                    block_tables: &bt,
                    qkv: &qkv,
                    k_cache: &kc,
                    v_cache: &vc,
                    out: &out,
                    runs: &ctx.storage("runs", ops::attention_runs_bytes(ops::SPLIT_TOKENS, nh, d)),
                },
                kiln_gpu::ops::SPLIT_TOKENS,
            )
            .unwrap();
            g.throughput(Throughput::Bytes((2 * seqs * ctx_len * nkv * d * 2) as u64));
            g.bench_function(format!("{family} {what}"), |b| {
                b.iter(|| {
                    run(&ctx, 1, &|p| {
                        l.record(p, tokens as u32, 0);
                    })
                })
            });
        }
    }
}

/// What a launch costs apart from its work: 100 dispatches of a product with a single
/// workgroup (64 outputs of 64 inputs, one row), and of one with 768 workgroups (SmolLM2's
/// LM head, 49,152 outputs, of 8 inputs), each in one pass. Throughput: dispatches.
fn launch(c: &mut Criterion) {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut g = c.benchmark_group("launch");
    g.sample_size(10);
    const REPS: usize = 100;
    for (name, n, kdim) in [
        ("1 workgroup", 64usize, 64usize),
        ("768 workgroups", 49152, 8),
    ] {
        let w = GpuMatrix::upload(&ctx, "w", &values(n * kdim, 1, 0.1), n, kdim).unwrap();
        let mm = product(&ctx, &k, &w, 1);
        g.throughput(Throughput::Elements(REPS as u64));
        g.bench_function(format!("{REPS} dispatches of {name}"), |b| {
            b.iter(|| {
                run(&ctx, REPS, &|p| {
                    mm.record(p, 1, 0);
                })
            })
        });
    }
}

/// The device's copy bandwidth, the ceiling a memory-bound decode step is measured against.
fn copy(c: &mut Criterion) {
    let ctx = gpu();
    let mut g = c.benchmark_group("copy");
    g.sample_size(10);
    let bytes = 64u64 << 20;
    let (src, dst) = (ctx.storage("src", bytes), ctx.storage("dst", bytes));
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("buffer to buffer 64 MiB", |b| {
        b.iter(|| {
            let mut enc = ctx.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&src, 0, &dst, 0, bytes);
            ctx.queue.submit([enc.finish()]);
            ctx.device
                .poll(wgpu::PollType::wait_indefinitely())
                .expect("poll");
        })
    });
}

criterion_group!(benches, matmul, matmul_formats, attention, launch, copy);
criterion_main!(benches);
