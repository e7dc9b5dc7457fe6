//! Every kernel against a CPU reference on seeded random inputs, with sizes that are not
//! multiples of the workgroup or tile sizes.

mod common;

use common::*;
use kiln_gpu::ops::{self, AttentionBuffers, Matmul, MatmulArgs};
use kiln_gpu::reference;
use kiln_gpu::{GpuMatrix, Kernels, KvDtype, Recorded};
use kiln_model::Activation;
use rand::Rng;
use rand::seq::SliceRandom;

#[test]
fn embedding_gathers_rows() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(1);
    let (vocab, hidden, t) = (37, 18, 13);
    let table = randn(&mut r, vocab * hidden, 1.0);
    let ids: Vec<u32> = (0..t).map(|_| r.random_range(0..vocab as u32)).collect();
    let m = GpuMatrix::upload(&ctx, "table", &table, vocab, hidden).unwrap();
    let (step, idb, x) = (
        step_buffer(&ctx, t as u32, 1, 0),
        buf_u32(&ctx, &ids),
        ctx.storage("x", (t * hidden * 4) as u64),
    );
    let launches = ops::embedding(&ctx, &k, &step, &idb, (&m, 1.5), &x);
    run_launches(&ctx, &launches.iter().collect::<Vec<_>>(), t as u32, 0);
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&i| f16_round(&table[i as usize * hidden..(i as usize + 1) * hidden]))
        .map(|v| v * 1.5)
        .collect();
    assert_close(
        "embedding",
        &read_f32(&ctx, &x, t * hidden),
        &want,
        0.0,
        0.0,
    );
}

/// Every matmul kernel (few rows: a matvec kernel; many: tiled; and the row-wise kernel of CPU
/// devices) with every flag combination, at widths that are and are not multiples of 8.
#[test]
fn matmul_matches_reference() {
    let ctx = gpu();
    for (name, k) in matmul_variants(&ctx) {
        for kdim in [70, 72, 200] {
            check_matmul(&ctx, &name, &k, kdim);
        }
    }
}

fn check_matmul(ctx: &kiln_gpu::GpuContext, name: &str, k: &Kernels, kdim: usize) {
    let ctx = ctx.clone();
    let mut r = rng(2);
    let n = 131;
    let w = randn(&mut r, n * kdim, 0.5);
    let wm = GpuMatrix::upload(&ctx, "w", &w, n, kdim).unwrap();
    let wr = f16_round(&w);
    let bias = randn(&mut r, n, 1.0);
    let bias_b = buf_f32(&ctx, &bias);
    let gain = randn(&mut r, kdim, 1.0);
    let gain_b = buf_f32(&ctx, &gain);
    for rows in [1usize, 3, 8, 9, 16, 17, 45, 64, 67] {
        for (norm, with_bias, accumulate) in [
            (false, false, false),
            (true, true, false),
            (false, false, true),
            (true, false, true),
        ] {
            let x = randn(&mut r, rows * kdim, 2.0);
            let y0 = randn(&mut r, rows * (n + 5), 1.0);
            // x's uniform head for the unaccumulated cases, its storage binding for the others.
            let (xb, yb) = (buf_x(&ctx, &x, !accumulate), buf_f32(&ctx, &y0));
            let step = step_buffer(&ctx, rows as u32, 1, 0);
            let mm = Matmul::new(
                &ctx,
                k,
                &step,
                MatmulArgs {
                    x: &xb,
                    w: &wm,
                    bias: with_bias.then_some(&bias_b),
                    y: &yb,
                    ldy: (n + 5) as u32,
                    out_offset: 3,
                    norm: norm.then_some((&gain_b, 1e-5)),
                    accumulate,
                    sample_rows: false,
                    pairs: None,
                },
            )
            .unwrap();
            run(&ctx, |p| mm.record(p, rows as u32, 0));
            let mut want = y0.clone();
            for t in 0..rows {
                let xr = &x[t * kdim..(t + 1) * kdim];
                let xin = if norm {
                    reference::rmsnorm(xr, &gain, 1e-5)
                } else {
                    xr.to_vec()
                };
                let out = reference::matvec(&wr, &xin);
                for j in 0..n {
                    let v = out[j] + if with_bias { bias[j] } else { 0.0 };
                    let idx = t * (n + 5) + 3 + j;
                    want[idx] = if accumulate { want[idx] + v } else { v };
                }
            }
            let what = format!(
                "matmul {name} k={kdim} rows={rows} norm={norm} bias={with_bias} acc={accumulate}"
            );
            assert_close(&what, &read_f32(&ctx, &yb, want.len()), &want, 1e-4, 1e-4);
        }
    }
}

/// A matrix split over several buffers (as one larger than a storage binding is) gives the same
/// embedding rows and products, bias included, as the whole matrix.
#[test]
fn split_matrix_matches_whole() {
    let ctx = gpu();
    let mut r = rng(7);
    let (rows, cols, t) = (200, 48, 11);
    let data = randn(&mut r, rows * cols, 1.0);
    let bias = buf_f32(&ctx, &randn(&mut r, rows, 1.0));
    let whole = GpuMatrix::upload(&ctx, "whole", &data, rows, cols).unwrap();
    let split = GpuMatrix::upload_chunked(
        &ctx,
        "split",
        &kiln_gpu::HostMatrix::from_f32(&data, rows, cols),
        64,
    )
    .unwrap();
    assert_eq!(split.chunks.len(), 4);
    let ids: Vec<u32> = (0..t).map(|_| r.random_range(0..rows as u32)).collect();
    let x = buf_f32(&ctx, &randn(&mut r, t * cols, 1.0));
    let gain = buf_f32(&ctx, &randn(&mut r, cols, 1.0));
    for rowwise in [false, true] {
        let k = Kernels::with_rowwise(&ctx, rowwise);
        for tokens in [3u32, t as u32] {
            let step = step_buffer(&ctx, tokens, 1, 0);
            let idb = buf_u32(&ctx, &ids);
            let outs: Vec<(Vec<f32>, Vec<f32>)> = [&whole, &split]
                .iter()
                .map(|m| {
                    let (e, y) = (
                        ctx.storage("e", (t * cols * 4) as u64),
                        ctx.storage("y", (t * rows * 4) as u64),
                    );
                    let emb = ops::embedding(&ctx, &k, &step, &idb, (m, 1.0), &e);
                    let args = MatmulArgs {
                        x: &x,
                        w: m,
                        bias: Some(&bias),
                        y: &y,
                        ldy: rows as u32,
                        out_offset: 0,
                        norm: Some((&gain, 1e-5)),
                        accumulate: false,
                        sample_rows: false,
                        pairs: None,
                    };
                    let mm = Matmul::new(&ctx, &k, &step, args).unwrap();
                    run(&ctx, |p| {
                        emb.iter().for_each(|l| {
                            l.record(p, tokens, 0);
                        });
                        mm.record(p, tokens, 0);
                    });
                    (
                        read_f32(&ctx, &e, tokens as usize * cols),
                        read_f32(&ctx, &y, tokens as usize * rows),
                    )
                })
                .collect();
            assert_close("split embedding", &outs[1].0, &outs[0].0, 0.0, 0.0);
            assert_close("split matmul", &outs[1].1, &outs[0].1, 1e-6, 1e-6);
        }
    }
}

/// Both gated activations: SiLU (SwiGLU) and GELU with the tanh approximation (GeGLU), on
/// values large enough to reach both tails.
#[test]
fn glu_matches_reference() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(3);
    let (t, inter) = (7, 301);
    let gu = randn(&mut r, t * 2 * inter, 4.0);
    let (step, gub, out) = (
        step_buffer(&ctx, t as u32, 1, 0),
        buf_f32(&ctx, &gu),
        ctx.storage("out", (t * inter * 4) as u64),
    );
    for act in [Activation::Silu, Activation::GeluTanh] {
        let l = ops::glu(&ctx, &k, &step, (inter, act), &gub, &out);
        run_launches(&ctx, &[&l], t as u32, 0);
        let want: Vec<f32> = (0..t * inter)
            .map(|i| {
                let (row, c) = (i / inter, i % inter);
                let (g, u) = (
                    gu[row * 2 * inter + c] as f64,
                    gu[row * 2 * inter + inter + c] as f64,
                );
                (reference::activation(act, g) * u) as f32
            })
            .collect();
        assert_close(
            &format!("glu {act:?}"),
            &read_f32(&ctx, &out, t * inter),
            &want,
            1e-5,
            1e-5,
        );
    }
}

/// `x += rmsnorm(y) * gain` on rows of an awkward width.
#[test]
fn residual_rmsnorm_matches_reference() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(14);
    let (t, hidden) = (9, 150);
    let x0 = randn(&mut r, t * hidden, 2.0);
    let y = randn(&mut r, t * hidden, 30.0);
    let gain = randn(&mut r, hidden, 1.0);
    let (step, xb, yb, gb) = (
        step_buffer(&ctx, t as u32, 1, 0),
        buf_f32(&ctx, &x0),
        buf_f32(&ctx, &y),
        buf_f32(&ctx, &gain),
    );
    let l = ops::residual_rmsnorm(&ctx, &k, &step, (hidden, 1e-6), &yb, &gb, &xb);
    run_launches(&ctx, &[&l], t as u32, 0);
    let want: Vec<f32> = x0
        .chunks(hidden)
        .zip(y.chunks(hidden))
        .flat_map(|(x, y)| {
            let n = reference::rmsnorm(y, &gain, 1e-6);
            x.iter().zip(n).map(|(a, b)| a + b).collect::<Vec<_>>()
        })
        .collect();
    assert_close(
        "residual_rmsnorm",
        &read_f32(&ctx, &xb, t * hidden),
        &want,
        1e-5,
        1e-5,
    );
}

#[test]
fn gather_rmsnorm_matches_reference() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(4);
    let (t, hidden) = (11, 150);
    let x = randn(&mut r, t * hidden, 3.0);
    let gain = randn(&mut r, hidden, 1.0);
    let rows = [10u32, 0, 4];
    let step = step_buffer(&ctx, t as u32, 3, 3);
    let (rb, xb, gb, out) = (
        buf_u32(&ctx, &rows),
        buf_f32(&ctx, &x),
        buf_f32(&ctx, &gain),
        ctx.storage("out", (3 * hidden * 4) as u64),
    );
    let l = ops::gather_rmsnorm(&ctx, &k, &step, (hidden, 1e-6), &rb, &xb, &gb, &out);
    run_launches(&ctx, &[&l], t as u32, 3);
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|&row| {
            reference::rmsnorm(
                &x[row as usize * hidden..(row as usize + 1) * hidden],
                &gain,
                1e-6,
            )
        })
        .collect();
    assert_close(
        "gather_rmsnorm",
        &read_f32(&ctx, &out, 3 * hidden),
        &want,
        1e-5,
        1e-4,
    );
}

/// RoPE and the KV write, for both cache types, at positions up to the end of a 32768-token
/// context against the rotation in f64 (of the checkpoint's order: the kernel's heads are in
/// the rotary pair layout). The f64-built table keeps the error at f32 rounding;
/// angles computed in f32 (`pos * inv_freq`, then `sin`/`cos`) are off by up to ~2e-3 rad at
/// the far positions, 200x the tolerance here.
#[test]
fn rope_kv_rotates_and_writes_cache() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(5);
    let (nh, nkv, d, t, slots, max_pos) = (6, 2, 20, 9, 70, 32768);
    let width = (nh + 2 * nkv) * d;
    let qkv = randn(&mut r, t * width, 1.0);
    let mut positions: Vec<u32> = (0..t - 2)
        .map(|_| r.random_range(0..max_pos as u32))
        .collect();
    positions.extend([0, max_pos as u32 - 1]);
    let mut slot_ids: Vec<u32> = (0..slots as u32).collect();
    slot_ids.shuffle(&mut r);
    slot_ids.truncate(t);
    let inv_freq: Vec<f64> = (0..d / 2)
        .map(|i| 1.0 / 10000f64.powf(2.0 * i as f64 / d as f64))
        .collect();
    let step = step_buffer(&ctx, t as u32, 1, 0);
    let table = ops::rope_table(&inv_freq, max_pos, 1.0);
    let (pb, sb, fb) = (
        buf_u32(&ctx, &positions),
        buf_u32(&ctx, &slot_ids),
        buf_f32(&ctx, &table),
    );
    // Qwen3's per-head q/k norm first, or not: the q gain, then the k gain (the kernel's in the
    // rotary pair layout, as q and k are).
    let gains = randn(&mut r, 2 * d, 1.0);
    let gain_b = buf_f32(&ctx, &pair_layout(&gains, d));
    for (qk_norm, dtype) in [
        (false, KvDtype::F16),
        (false, KvDtype::F32),
        (true, KvDtype::F16),
    ] {
        let mut want = qkv.clone();
        let mut want_k = vec![0f32; slots * nkv * d];
        let mut want_v = vec![0f32; slots * nkv * d];
        for i in 0..t {
            let row = &mut want[i * width..(i + 1) * width];
            for (head, h) in row[..(nh + nkv) * d].chunks_mut(d).enumerate() {
                let mut x = checkpoint_layout(h, d);
                if qk_norm {
                    let g = &gains[if head < nh { 0 } else { d }..][..d];
                    x = reference::rmsnorm(&x, g, 1e-6);
                }
                reference::rope(&mut x, positions[i] as usize, &inv_freq, 1.0);
                h.copy_from_slice(&pair_layout(&x, d));
            }
            let s = slot_ids[i] as usize;
            want_k[s * nkv * d..(s + 1) * nkv * d].copy_from_slice(&row[nh * d..(nh + nkv) * d]);
            want_v[s * nkv * d..(s + 1) * nkv * d].copy_from_slice(&row[(nh + nkv) * d..]);
        }
        let qb = buf_f32(&ctx, &qkv);
        let words = slots * nkv * d * dtype.bytes() as usize / 4;
        let (kc, vc) = (
            ctx.storage("k", words as u64 * 4),
            ctx.storage("v", words as u64 * 4),
        );
        let rotary = ops::Rotary {
            heads: (nh, nkv, d),
            kv_dtype: dtype,
            max_positions: max_pos,
            positions: &pb,
            slot_mapping: &sb,
            rope: &fb,
            k_cache: &kc,
            v_cache: &vc,
        };
        let l = ops::rope_kv(
            &ctx,
            &k,
            &step,
            &rotary,
            &qb,
            qk_norm.then_some((&gain_b, 1e-6)),
        );
        run_launches(&ctx, &[&l], t as u32, 0);
        assert_close(
            &format!("rope q/k {dtype} qk_norm {qk_norm}"),
            &read_f32(&ctx, &qb, want.len()),
            &want,
            1e-5,
            0.0,
        );
        let (got_k, got_v) = (
            dtype.decode(&read_u32(&ctx, &kc, words)),
            dtype.decode(&read_u32(&ctx, &vc, words)),
        );
        // f16: one rounding of a value that is itself within 1e-5 of the reference.
        let (kw, vw) = match dtype {
            KvDtype::F16 => (f16_round(&want_k), f16_round(&want_v)),
            KvDtype::F32 => (want_k.clone(), want_v.clone()),
        };
        let rtol = if dtype == KvDtype::F16 { 1e-3 } else { 0.0 };
        assert_close(&format!("k cache {dtype}"), &got_k, &kw, 1e-5, rtol);
        assert_close(&format!("v cache {dtype}"), &got_v, &vw, 0.0, rtol);
    }
}

/// Several sequences in one dispatch: a prefill chunk on top of cached context that crosses
/// block boundaries, decode rows with long contexts, and a fresh prompt. The GPU family both
/// whole and with the context split in runs (flash-decoding: contexts of 1 to 5 runs here),
/// its query tiles of 1 to 16 tokens starting anywhere in a segment and ending where it ends;
/// the row-wise family with a row a lane and with 8 rows a subgroup (blocks of rows that
/// start mid-token and span tokens, and 16 heads a KV head, two blocks a token);
/// and with sliding windows of 40 and 20 keys, shorter than most contexts here.
#[test]
fn paged_attention_mixes_prefill_and_decode() {
    let ctx = gpu();
    // (row-wise family, its subgroup attention, split steps up to)
    for (rowwise, subgroups, split_tokens) in [
        (false, false, 0),
        (false, false, 64),
        (true, true, 0),
        (true, false, 0),
    ] {
        let mut k = Kernels::with_rowwise(&ctx, rowwise);
        if rowwise && subgroups {
            // lavapipe has subgroups of 8: the kernel CPU adapters get must be the one tested.
            assert!(k.rowwise_subgroups, "no subgroup row-wise attention here");
        }
        k.rowwise_subgroups = subgroups;
        for dtype in [KvDtype::F16, KvDtype::F32] {
            check_attention(&ctx, &k, dtype, split_tokens, (6, 2, 24), None);
        }
        // 16 query heads of 64 on one KV head: every output slot of a GPU-family invocation.
        check_attention(&ctx, &k, KvDtype::F16, split_tokens, (16, 1, 64), None);
        // Query tiles of 16 tokens (one head per KV head), of 2 (Llama 3 8B's 4 heads of 128
        // per KV head) and of 1 (Gemma 3's 4 heads of 256).
        check_attention(&ctx, &k, KvDtype::F32, split_tokens, (4, 4, 32), None);
        check_attention(&ctx, &k, KvDtype::F16, split_tokens, (8, 2, 128), Some(20));
        check_attention(&ctx, &k, KvDtype::F16, split_tokens, (4, 1, 256), None);
        check_attention(&ctx, &k, KvDtype::F16, split_tokens, (6, 2, 24), Some(40));
    }
}

fn check_attention(
    ctx: &kiln_gpu::GpuContext,
    k: &Kernels,
    dtype: KvDtype,
    split_tokens: u32,
    (nh, nkv, d): (usize, usize, usize),
    window: Option<usize>,
) {
    let ctx = ctx.clone();
    let mut r = rng(6);
    let bs = kiln_core::BLOCK_SIZE;
    let num_blocks = 40;
    // (cached tokens before this step, query tokens this step)
    let seqs = [
        (13usize, 21usize),
        (99, 1),
        (0, 5),
        (70, 1),
        (16, 17),
        (300, 1),
    ];
    let kv_width = nkv * d;
    // The reference reads what the cache holds: values rounded to f16 for an f16 cache.
    let kc = dtype.decode(&dtype.encode(&randn(&mut r, num_blocks * bs * kv_width, 1.0)));
    let vc = dtype.decode(&dtype.encode(&randn(&mut r, num_blocks * bs * kv_width, 1.0)));
    let mut free: Vec<u32> = (0..num_blocks as u32).collect();
    free.shuffle(&mut r);
    let (mut positions, mut token_seq, mut seq_info, mut tables) = (vec![], vec![], vec![], vec![]);
    let mut per_seq_tables = vec![];
    for (s, &(cached, q)) in seqs.iter().enumerate() {
        let ctx_len = cached + q;
        let table: Vec<u32> = (0..ctx_len.div_ceil(bs))
            .map(|_| free.pop().unwrap())
            .collect();
        seq_info.extend([
            positions.len() as u32,
            q as u32,
            ctx_len as u32,
            tables.len() as u32,
        ]);
        tables.extend_from_slice(&table);
        per_seq_tables.push(table);
        for i in 0..q {
            positions.push((cached + i) as u32);
            token_seq.push(s as u32);
        }
    }
    let t = positions.len();
    let stride = (nh + 2 * nkv) * d;
    let qkv = randn(&mut r, t * stride, 1.0);
    let step = step_buffer(&ctx, t as u32, seqs.len() as u32, 0);
    let bufs = (
        buf_u32(&ctx, &positions),
        buf_u32(&ctx, &token_seq),
        buf_u32(&ctx, &seq_info),
        buf_u32(&ctx, &tables),
    );
    let (kb, vb) = (
        buf_u32(&ctx, &dtype.encode(&kc)),
        buf_u32(&ctx, &dtype.encode(&vc)),
    );
    let (qb, out) = (
        buf_f32(&ctx, &qkv),
        ctx.storage("out", (t * nh * d * 4) as u64),
    );
    let l = ops::attention(
        &ctx,
        k,
        &step,
        (nh, nkv, d),
        (window, 1.0 / (d as f32).sqrt()),
        dtype,
        AttentionBuffers {
            positions: &bufs.0,
            token_seq: &bufs.1,
            seq_info: &bufs.2,
            block_tables: &bufs.3,
            qkv: &qb,
            k_cache: &kb,
            v_cache: &vb,
            out: &out,
        },
        split_tokens,
    )
    .unwrap();
    let mut want = vec![0f32; t * nh * d];
    for i in 0..t {
        let table = &per_seq_tables[token_seq[i] as usize];
        let n_keys = positions[i] as usize + 1;
        let first = window.map_or(0, |w| n_keys.saturating_sub(w));
        let slot = |j: usize| table[j / bs] as usize * bs + j % bs;
        for h in 0..nh {
            let kvh = h / (nh / nkv);
            let q = &qkv[i * stride + h * d..i * stride + (h + 1) * d];
            let scores: Vec<f64> = (first..n_keys)
                .map(|j| {
                    let kr = &kc[slot(j) * kv_width + kvh * d..][..d];
                    q.iter()
                        .zip(kr)
                        .map(|(a, b)| *a as f64 * *b as f64)
                        .sum::<f64>()
                        / (d as f64).sqrt()
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = scores.iter().map(|s| (s - m).exp()).sum();
            for e in 0..d {
                want[i * nh * d + h * d + e] = (first..n_keys)
                    .map(|j| {
                        (scores[j - first] - m).exp() / z
                            * vc[slot(j) * kv_width + kvh * d + e] as f64
                    })
                    .sum::<f64>() as f32;
            }
        }
    }
    // As many sampled rows as tokens: the launch for decoding steps (the subgroup row-wise
    // kernel with a workgroup per token's heads of a KV head), here on every segment.
    for samples in [0, t as u32] {
        ctx.queue
            .write_buffer(&out, 0, bytemuck::cast_slice(&vec![0f32; want.len()]));
        run(&ctx, |p| l.record(p, t as u32, samples));
        assert_close(
            &format!(
                "attention rowwise={} split {split_tokens} samples {samples} kv {dtype} heads {nh}/{nkv}x{d} window {window:?}",
                k.rowwise
            ),
            &read_f32(&ctx, &out, want.len()),
            &want,
            1e-4,
            1e-3,
        );
    }
}

/// A matrix with a value beyond f16's range stays f32 on the GPU instead of holding an
/// infinity, and every matmul kernel reads it so.
#[test]
fn weights_beyond_f16_range_stay_f32() {
    let ctx = gpu();
    let mut r = rng(9);
    let (n, kdim) = (37, 72);
    let mut w = randn(&mut r, n * kdim, 0.5);
    w[5 * kdim + 3] = 1.0e5;
    w[20 * kdim + 70] = -7.0e4;
    let m = kiln_gpu::HostMatrix::from_f32(&w, n, kdim);
    assert_eq!(m.format, kiln_gpu::WeightFormat::F32);
    let g = GpuMatrix::upload_host(&ctx, "w", &m).unwrap();
    check_plain_product(
        &ctx,
        "f32 weights",
        &g,
        &w,
        &[1, 9, 40],
        &mut r,
        (1e-2, 1e-4),
    );
}
