//! The weight-reading kernels (embedding, matvec and matmul of both families) on matrices kept
//! quantized, against a CPU reference that dequantizes with kiln-model's own code. Row counts
//! and widths are awkward: not multiples of the tiles, K a few blocks of 32.

mod common;

use common::*;
use kiln_gpu::ops::{self, Matmul, MatmulArgs, OutputMap};
use kiln_gpu::reference;
use kiln_gpu::{GpuContext, GpuMatrix, HostMatrix, Kernels, Recorded, WeightFormat};
use kiln_model::DType;
use kiln_model::testing::quantize;
use rand::Rng;
use rand::rngs::StdRng;

const FORMATS: [WeightFormat; 13] = [
    WeightFormat::Q8_0,
    WeightFormat::Q4_0,
    WeightFormat::Q4_1,
    WeightFormat::Q5_0,
    WeightFormat::Q5_1,
    WeightFormat::Q2_K,
    WeightFormat::Q3_K,
    WeightFormat::Q4_K,
    WeightFormat::Q5_K,
    WeightFormat::Q6_K,
    WeightFormat::MXFP4,
    WeightFormat::IQ4_NL,
    WeightFormat::IQ4_XS,
];

/// A random `(rows, cols)` matrix quantized to `format`'s GGUF type.
fn quantized(r: &mut StdRng, format: WeightFormat, rows: usize, cols: usize) -> HostMatrix {
    let data = randn(r, rows * cols, 0.5);
    let m = HostMatrix::from_stored(format.dtype(), quantize(format.dtype(), &data), rows, cols)
        .unwrap();
    assert_eq!(m.format, format, "{format:?} must stay quantized");
    m
}

#[test]
fn quantized_matrices_take_their_file_bytes() {
    let ctx = gpu();
    let mut r = rng(10);
    for format in FORMATS {
        let (rows, cols) = (45, 3 * format.cols_multiple());
        let m = quantized(&mut r, format, rows, cols);
        let g = GpuMatrix::upload_host(&ctx, "w", &m).unwrap();
        let file = format.dtype().byte_len(rows * cols) as u64;
        let gpu = (rows * format.gpu_row_bytes(cols)) as u64;
        // One buffer, rounded up to 16 bytes by the allocator at most; at most 1% over the file.
        assert!(
            g.bytes() >= gpu && g.bytes() < gpu + 16 && gpu * 100 <= file * 101,
            "{format:?}: {} GPU bytes for {file} in the file",
            g.bytes()
        );
    }
    // Float types are stored as f16.
    let data = randn(&mut r, 2 * 256, 1.0);
    let m = HostMatrix::from_stored(DType::BF16, quantize(DType::BF16, &data), 2, 256).unwrap();
    assert_eq!(m.format, WeightFormat::F16);
}

#[test]
fn quantized_embedding_gathers_rows() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(11);
    let (vocab, t) = (37, 13);
    for format in FORMATS {
        let hidden = 3 * format.cols_multiple();
        let m = quantized(&mut r, format, vocab, hidden);
        let table = m.to_f32();
        let g = GpuMatrix::upload_host(&ctx, "table", &m).unwrap();
        let ids: Vec<u32> = (0..t).map(|_| r.random_range(0..vocab as u32)).collect();
        let (step, idb, x) = (
            step_buffer(&ctx, t as u32, 1, 0),
            buf_u32(&ctx, &ids),
            ctx.storage("x", (t * hidden * 4) as u64),
        );
        let launches = ops::embedding(&ctx, &k, &step, (&idb, false), (&g, 1.0), &x);
        run_launches(&ctx, &launches.iter().collect::<Vec<_>>(), t as u32, 0);
        let want: Vec<f32> = ids
            .iter()
            .flat_map(|&i| table[i as usize * hidden..(i as usize + 1) * hidden].to_vec())
            .collect();
        assert_close(
            &format!("{format:?} embedding"),
            &read_f32(&ctx, &x, t * hidden),
            &want,
            1e-6,
            1e-6,
        );
    }
}

#[test]
fn quantized_matmul_matches_reference() {
    let ctx = gpu();
    for (name, k) in matmul_variants(&ctx) {
        for format in FORMATS {
            for blocks in [1, 3] {
                check(&ctx, &name, &k, format, blocks * format.cols_multiple());
            }
        }
    }
}

fn check(ctx: &GpuContext, name: &str, k: &Kernels, format: WeightFormat, kdim: usize) {
    let mut r = rng(12);
    let n = 131;
    let m = quantized(&mut r, format, n, kdim);
    let (wm, wr) = (GpuMatrix::upload_host(ctx, "w", &m).unwrap(), m.to_f32());
    let bias = randn(&mut r, n, 1.0);
    let bias_b = buf_f32(ctx, &bias);
    let gain = randn(&mut r, kdim, 1.0);
    let gain_b = buf_f32(ctx, &gain);
    for rows in [1usize, 3, 8, 9, 45, 64, 65] {
        for (norm, with_bias, accumulate) in [(false, false, false), (true, true, true)] {
            let x = randn(&mut r, rows * kdim, 2.0);
            let y0 = randn(&mut r, rows * (n + 5), 1.0);
            // x's uniform head for the unaccumulated cases, its storage binding for the others.
            let (xb, yb) = (buf_x(ctx, &x, !accumulate), buf_f32(ctx, &y0));
            let step = step_buffer(ctx, rows as u32, 1, 0);
            let args = MatmulArgs {
                x: &xb,
                w: &wm,
                bias: with_bias.then_some(&bias_b),
                y: &yb,
                ldy: (n + 5) as u32,
                out_offset: 3,
                norm: norm.then_some((&gain_b, 1e-5)),
                accumulate,
                sample_rows: false,
                map: OutputMap::Identity,
                pairs: None,
            };
            let mm = Matmul::new(ctx, k, &step, args).unwrap();
            run(ctx, |p| mm.record(p, rows as u32, 0));
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
            let what = format!("{format:?} matmul {name} k={kdim} rows={rows} norm={norm}");
            let (atol, rtol) = tolerance(k, 1e-4, 1e-4);
            assert_close(&what, &read_f32(ctx, &yb, want.len()), &want, atol, rtol);
        }
    }
}

/// A quantized matrix split over several buffers (at row, hence block, boundaries) gives the
/// same embedding rows and products as the whole matrix.
#[test]
fn quantized_split_matrix_matches_whole() {
    let ctx = gpu();
    let mut r = rng(13);
    let (rows, t) = (200, 11);
    for format in FORMATS {
        let cols = 2 * format.cols_multiple();
        let m = quantized(&mut r, format, rows, cols);
        let whole = GpuMatrix::upload_host(&ctx, "whole", &m).unwrap();
        let split = GpuMatrix::upload_chunked(&ctx, "split", &m, 64).unwrap();
        assert_eq!(split.chunks.len(), 4);
        let ids: Vec<u32> = (0..t).map(|_| r.random_range(0..rows as u32)).collect();
        let x = buf_f32(&ctx, &randn(&mut r, t * cols, 1.0));
        let gain = buf_f32(&ctx, &randn(&mut r, cols, 1.0));
        for rowwise in [false, true] {
            let k = Kernels::with_rowwise(&ctx, rowwise);
            for tokens in [1u32, t as u32] {
                let step = step_buffer(&ctx, tokens, 1, 0);
                let idb = buf_u32(&ctx, &ids);
                let outs: Vec<(Vec<f32>, Vec<f32>)> = [&whole, &split]
                    .iter()
                    .map(|w| {
                        let (e, y) = (
                            ctx.storage("e", (t * cols * 4) as u64),
                            ctx.storage("y", (t * rows * 4) as u64),
                        );
                        let emb = ops::embedding(&ctx, &k, &step, (&idb, false), (w, 1.0), &e);
                        let args = MatmulArgs {
                            x: &x,
                            w,
                            bias: None,
                            y: &y,
                            ldy: rows as u32,
                            out_offset: 0,
                            norm: Some((&gain, 1e-5)),
                            accumulate: false,
                            sample_rows: false,
                            map: OutputMap::Identity,
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
                assert_close(
                    &format!("{format:?} split embedding"),
                    &outs[1].0,
                    &outs[0].0,
                    0.0,
                    0.0,
                );
                assert_close(
                    &format!("{format:?} split matmul"),
                    &outs[1].1,
                    &outs[0].1,
                    1e-6,
                    1e-6,
                );
            }
        }
    }
}

/// A matrix stacked from tensors of different types (as a Q4_K_M file's Q, K and V projections
/// are: Q4_K, Q4_K, Q6_K) keeps each part's format, with every kernel.
#[test]
fn stacked_mixed_formats_match_reference() {
    let ctx = gpu();
    let mut r = rng(14);
    let cols = 256;
    let parts = vec![
        quantized(&mut r, WeightFormat::Q4_K, 70, cols),
        quantized(&mut r, WeightFormat::Q6_K, 45, cols),
        HostMatrix::from_f32(&randn(&mut r, 13 * cols, 0.5), 13, cols),
    ];
    let w: Vec<f32> = parts.iter().flat_map(|p| p.to_f32()).collect();
    let g = GpuMatrix::upload_stacked(&ctx, "qkv", &parts).unwrap();
    let formats: Vec<WeightFormat> = g.chunks.iter().map(|c| c.format).collect();
    assert_eq!(
        formats,
        [WeightFormat::Q4_K, WeightFormat::Q6_K, WeightFormat::F16]
    );
    check_plain_product(
        &ctx,
        "stacked Q4_K/Q6_K/f16",
        &g,
        &w,
        &[1, 9, 45],
        &mut r,
        (1e-4, 1e-4),
    );
}
