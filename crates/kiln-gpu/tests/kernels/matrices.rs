//! Kernels that read a weight matrix: the embedding gather and every matmul kernel, on whole
//! matrices, matrices split over several buffers, and f32 matrices beyond f16's range.

use super::*;

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
    let launches = ops::embedding(&ctx, &k, &step, (&idb, false), (&m, 1.5), &x);
    run_launches(&ctx, &launches.iter().collect::<Vec<_>>(), t as u32, 0);
    let row = |table: &[f32], i: u32| f16_round(&table[i as usize * hidden..][..hidden]);
    let mut want: Vec<f32> = ids
        .iter()
        .flat_map(|&i| row(&table, i))
        .map(|v| v * 1.5)
        .collect();
    assert_close(
        "embedding",
        &read_f32(&ctx, &x, t * hidden),
        &want,
        0.0,
        0.0,
    );
    // A learned position embedding's rows added on, by the tokens' positions.
    let positions = randn(&mut r, 23 * hidden, 1.0);
    let pos: Vec<u32> = (0..t).map(|_| r.random_range(0..23)).collect();
    let pm = GpuMatrix::upload(&ctx, "positions", &positions, 23, hidden).unwrap();
    let pb = buf_u32(&ctx, &pos);
    let launches = ops::embedding(&ctx, &k, &step, (&pb, true), (&pm, 1.0), &x);
    run_launches(&ctx, &launches.iter().collect::<Vec<_>>(), t as u32, 0);
    let added = pos.iter().flat_map(|&p| row(&positions, p));
    want.iter_mut().zip(added).for_each(|(w, p)| *w += p);
    assert_close(
        "position embedding",
        &read_f32(&ctx, &x, t * hidden),
        &want,
        1e-6,
        0.0,
    );
}

/// Every matmul kernel (few rows: a matvec kernel; many: tiled; and the row-wise kernel of CPU
/// devices) with every flag combination, the soft cap and the scale, at widths that are and are not
/// multiples of 8.
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
        // The last three: Gemma 2's soft cap after the bias (outputs of a few units; the cap
        // of 3 bends them), Granite's scale before the residual adds the output, and a MLP's
        // relu(v)^2 after the bias (about half the outputs negative).
        for (norm, with_bias, accumulate, map) in [
            (false, false, false, OutputMap::Identity),
            (true, true, false, OutputMap::Identity),
            (false, false, true, OutputMap::Identity),
            (true, false, true, OutputMap::Identity),
            (true, true, false, OutputMap::SoftCap(3.0)),
            (false, true, true, OutputMap::Scale(0.3)),
            (true, true, false, OutputMap::Relu2),
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
                    map,
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
                    let v = match map {
                        OutputMap::Identity => v,
                        OutputMap::Scale(s) => v * s,
                        OutputMap::SoftCap(c) => reference::soft_cap(v as f64, c) as f32,
                        OutputMap::Relu2 => v.max(0.0) * v.max(0.0),
                    };
                    let idx = t * (n + 5) + 3 + j;
                    want[idx] = if accumulate { want[idx] + v } else { v };
                }
            }
            let what = format!(
                "matmul {name} k={kdim} rows={rows} norm={norm} bias={with_bias} acc={accumulate} map={map:?}"
            );
            let (atol, rtol) = tolerance(k, 1e-4, 1e-4);
            assert_close(&what, &read_f32(&ctx, &yb, want.len()), &want, atol, rtol);
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
                    let emb = ops::embedding(&ctx, &k, &step, (&idb, false), (m, 1.0), &e);
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
            assert_close("split embedding", &outs[1].0, &outs[0].0, 0.0, 0.0);
            assert_close("split matmul", &outs[1].1, &outs[0].1, 1e-6, 1e-6);
        }
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
