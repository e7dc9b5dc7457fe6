//! The QKV product with the rotary step and the KV write in its epilogue
//! (`epilogue_rotary.wgsl`): every matrix kernel variant, awkward row counts, f16 and
//! quantized matrices split over several buffers (and q, k in one format with v in another),
//! with and without a bias, into f16, f32 and fp8 caches (an fp8 word holds two pairs, each
//! written by its own invocation); against the CPU: the normed product in
//! the checkpoint's row order, its q and k heads rotated in f64, then laid out in the rotary
//! pair layout as the GPU holds them.

mod common;

use common::*;
use kiln_gpu::ops::{self, Matmul, MatmulArgs, OutputMap, Pairs, Rotary};
use kiln_gpu::{GpuMatrix, HostMatrix, KvDtype, KvLayout, Recorded, WeightFormat, reference};
use kiln_model::testing::quantize;
use rand::Rng;
use rand::seq::SliceRandom;

/// The matrix as the runner uploads it: rows of q and k heads reordered into the pair layout.
fn host(
    format: WeightFormat,
    w: &[f32],
    rows: usize,
    cols: usize,
    d: usize,
    rotated: usize,
) -> HostMatrix {
    let m = match format {
        WeightFormat::F16 => HostMatrix::from_f32(w, rows, cols),
        f => HostMatrix::from_stored(f.dtype(), quantize(f.dtype(), w), rows, cols).unwrap(),
    };
    m.reorder_rows(|r| {
        if r < rotated {
            ops::paired_row(r, d, d)
        } else {
            r
        }
    })
}

#[test]
fn rotary_epilogue_matches_the_cpu() {
    let ctx = gpu();
    let mut r = rng(41);
    let (nh, nkv, d, kdim) = (5, 1, 16, 64);
    let (q_w, kv_w) = (nh * d, nkv * d);
    let (rows_w, rotated) = (q_w + 2 * kv_w, q_w + kv_w);
    let (slots, max_pos) = (50, 4096);
    let rope = kiln_model::LayerRope {
        inv_freq: (0..d / 2)
            .map(|i| 1.0 / 10000f64.powf(2.0 * i as f64 / d as f64))
            .collect(),
        attention_factor: 1.0,
    };
    let table = buf_f32(&ctx, &ops::rope_table(&rope, d / 2, max_pos));
    let gain = randn(&mut r, kdim, 1.0);
    let gain_b = buf_f32(&ctx, &gain);
    let mut checked = 0;
    // (q and k format, v format, rows per chunk): one matrix in 64-row chunks, or two formats.
    let layouts = [
        (WeightFormat::F16, WeightFormat::F16, 64),
        (WeightFormat::Q8_0, WeightFormat::Q8_0, 64),
        (WeightFormat::Q4_1, WeightFormat::Q4_1, 32),
        (WeightFormat::Q8_0, WeightFormat::F16, 0),
    ];
    for (qk_format, v_format, chunk) in layouts {
        let w = randn(&mut r, rows_w * kdim, 0.3);
        let (qk, v) = w.split_at(rotated * kdim);
        let parts = [
            host(qk_format, qk, rotated, kdim, d, rotated),
            host(v_format, v, kv_w, kdim, d, 0),
        ];
        let g = if chunk > 0 && qk_format == v_format {
            let mut whole = parts[0].clone();
            whole.bytes.extend_from_slice(&parts[1].bytes);
            whole.rows = rows_w;
            GpuMatrix::upload_chunked(&ctx, "qkv", &whole, chunk).unwrap()
        } else {
            GpuMatrix::upload_stacked(&ctx, "qkv", &parts).unwrap()
        };
        assert!(g.chunks.len() >= 2, "{} chunks", g.chunks.len());
        // What the GPU holds, back in the checkpoint's row order, as f32.
        let held: Vec<f32> = parts.iter().flat_map(|p| p.to_f32()).collect();
        let mut w_ck = vec![0f32; held.len()];
        for row in 0..rows_w {
            let src = if row < rotated {
                ops::paired_row(row, d, d)
            } else {
                row
            };
            w_ck[src * kdim..(src + 1) * kdim].copy_from_slice(&held[row * kdim..(row + 1) * kdim]);
        }
        for (name, kernels) in matmul_variants(&ctx) {
            for (tokens, dtype, with_bias) in [
                (1, KvDtype::F16, false),
                (2, KvDtype::F32, true),
                (7, KvDtype::F16, true),
                (9, KvDtype::F32, false),
                (33, KvDtype::F16, false),
                (11, KvDtype::Fp8, true),
            ] {
                let x = randn(&mut r, tokens * kdim, 2.0);
                let bias = randn(&mut r, rows_w, 0.5);
                let positions: Vec<u32> = (0..tokens)
                    .map(|_| r.random_range(0..max_pos as u32))
                    .collect();
                let mut slot_ids: Vec<u32> = (0..slots as u32).collect();
                slot_ids.shuffle(&mut r);
                slot_ids.truncate(tokens);
                let layout = KvLayout::new(1, nkv, d, dtype);
                let words = slots * kv_w * dtype.bytes() as usize / 4;
                let (kc, vc) = (
                    ctx.storage("k", words as u64 * 4),
                    ctx.storage("v", words as u64 * 4),
                );
                let (xb, yb, pb, sb) = (
                    buf_x(&ctx, &x, true),
                    ctx.storage("qkv", (tokens * rows_w * 4) as u64),
                    buf_u32(&ctx, &positions),
                    buf_u32(&ctx, &slot_ids),
                );
                let bias_b = buf_f32(
                    &ctx,
                    &pair_layout(&bias[..rotated], d)
                        .into_iter()
                        .chain(bias[rotated..].iter().copied())
                        .collect::<Vec<_>>(),
                );
                let step = step_buffer(&ctx, tokens as u32, 1, 0);
                let args = MatmulArgs {
                    x: &xb,
                    w: &g,
                    bias: with_bias.then_some(&bias_b),
                    y: &yb,
                    ldy: rows_w as u32,
                    out_offset: 0,
                    norm: Some((&gain_b, 1e-5)),
                    accumulate: false,
                    sample_rows: false,
                    map: OutputMap::Identity,
                    pairs: Some(Pairs::Rotary(Rotary {
                        heads: (nh, nkv, d),
                        kv_dtype: dtype,
                        max_positions: max_pos,
                        positions: &pb,
                        slot_mapping: &sb,
                        rope: &table,
                        k_cache: &kc,
                        v_cache: &vc,
                    })),
                };
                let mm = Matmul::new(&ctx, &kernels, &step, args).unwrap();
                run(&ctx, |p| mm.record(p, tokens as u32, 0));

                let (mut want_q, mut want_k, mut want_v) =
                    (vec![], vec![0f32; slots * kv_w], vec![0f32; slots * kv_w]);
                for t in 0..tokens {
                    let xn = reference::rmsnorm(&x[t * kdim..(t + 1) * kdim], &gain, 1e-5);
                    let mut out = reference::matvec(&w_ck, &xn);
                    if with_bias {
                        out.iter_mut().zip(&bias).for_each(|(o, b)| *o += b);
                    }
                    for h in out[..rotated].chunks_mut(d) {
                        reference::rope(h, positions[t] as usize, &rope.inv_freq, 1.0);
                        h.copy_from_slice(&pair_layout(h, d));
                    }
                    want_q.extend_from_slice(&out[..q_w]);
                    let s = slot_ids[t] as usize;
                    want_k[s * kv_w..(s + 1) * kv_w].copy_from_slice(&out[q_w..rotated]);
                    want_v[s * kv_w..(s + 1) * kv_w].copy_from_slice(&out[rotated..]);
                }
                let what = format!(
                    "{qk_format:?}/{v_format:?} {name} tokens={tokens} kv {dtype} bias {with_bias}"
                );
                let y = read_f32(&ctx, &yb, tokens * rows_w);
                let got_q: Vec<f32> = y
                    .chunks(rows_w)
                    .flat_map(|row| row[..q_w].to_vec())
                    .collect();
                let (atol, rtol_q) = tolerance(&kernels, 1e-4, 1e-4);
                assert_close(&format!("q {what}"), &got_q, &want_q, atol, rtol_q);
                // One rounding into the cache: half a step of f16 or fp8 (1/16 relative, 2^-10
                // below fp8's normals).
                let (atol, rtol) = match dtype {
                    KvDtype::F16 => (atol, 1e-3f32.max(rtol_q)),
                    KvDtype::F32 => (atol, 1e-4f32.max(rtol_q)),
                    KvDtype::Fp8 => (atol + 2f32.powi(-10), 1.0 / 16.0 + rtol_q),
                    KvDtype::Q8 => unreachable!("the rotary epilogue refuses q8_0"),
                };
                let (got_k, got_v) = (
                    layout.decode(&read_u32(&ctx, &kc, words)),
                    layout.decode(&read_u32(&ctx, &vc, words)),
                );
                assert_close(&format!("k {what}"), &got_k, &want_k, atol, rtol);
                assert_close(&format!("v {what}"), &got_v, &want_v, atol, rtol);
                checked += 1;
            }
        }
    }
    assert!(checked >= 4 * 2 * 6, "{checked} cases");
}

/// The epilogue refuses what it cannot do: a matrix of the wrong height, a residual, a q8_0
/// cache (whose scales need whole groups).
#[test]
fn rotary_epilogue_refuses_other_products() {
    let ctx = gpu();
    let kernels = kiln_gpu::Kernels::new(&ctx);
    let (nh, nkv, d, kdim) = (2, 1, 8, 32);
    let b = |n: usize| ctx.storage("b", (n * 4) as u64);
    let (x, y, pos, slots, rope, kc, vc) = (b(kdim), b(64), b(1), b(1), b(d), b(64), b(64));
    let step = step_buffer(&ctx, 1, 1, 0);
    let whole = (nh + 2 * nkv) * d;
    for (rows, accumulate, kv_dtype) in [
        (whole - 2, false, KvDtype::F16),
        (whole, true, KvDtype::F16),
        (whole, false, KvDtype::Q8),
    ] {
        let w = GpuMatrix::upload(&ctx, "w", &vec![0.0; rows * kdim], rows, kdim).unwrap();
        let args = MatmulArgs {
            x: &x,
            w: &w,
            bias: None,
            y: &y,
            ldy: rows as u32,
            out_offset: 0,
            norm: None,
            accumulate,
            sample_rows: false,
            map: OutputMap::Identity,
            pairs: Some(Pairs::Rotary(Rotary {
                heads: (nh, nkv, d),
                kv_dtype,
                max_positions: 1,
                positions: &pos,
                slot_mapping: &slots,
                rope: &rope,
                k_cache: &kc,
                v_cache: &vc,
            })),
        };
        let err = Matmul::new(&ctx, &kernels, &step, args)
            .err()
            .expect("refused");
        let want = if kv_dtype == KvDtype::Q8 {
            "q8_0"
        } else {
            "rotary epilogue"
        };
        assert!(err.to_string().contains(want), "{err}");
    }
}
