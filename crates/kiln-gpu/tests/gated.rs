//! The gate/up product with its gated activation in the epilogue (`matmul_epilogue.wgsl`): the
//! rows of gate and up interleaved at load, every matrix kernel variant, awkward row counts,
//! SiLU and GELU, f16 and quantized matrices split over several buffers, with the RMSNorm
//! fused in; against the CPU: `act(rmsnorm(x) . gate_j) * (rmsnorm(x) . up_j)`.

mod common;

use common::*;
use kiln_gpu::ops::{Matmul, MatmulArgs, OutputMap, Pairs};
use kiln_gpu::reference;
use kiln_gpu::{GpuMatrix, HostMatrix, Recorded, WeightFormat};
use kiln_model::Activation;
use kiln_model::testing::quantize;

#[test]
fn gated_products_match_the_cpu() {
    let ctx = gpu();
    let mut r = rng(31);
    let (inter, kdim) = (70, 64);
    let gain = randn(&mut r, kdim, 1.0);
    let gain_b = buf_f32(&ctx, &gain);
    let mut checked = 0;
    for format in [WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_1] {
        let (gate, up) = (
            randn(&mut r, inter * kdim, 0.5),
            randn(&mut r, inter * kdim, 0.5),
        );
        let host = |w: &[f32]| match format {
            WeightFormat::F16 => HostMatrix::from_f32(w, inter, kdim),
            f => HostMatrix::from_stored(f.dtype(), quantize(f.dtype(), w), inter, kdim).unwrap(),
        };
        let parts = [host(&gate), host(&up)];
        // What the GPU holds, as f32; two chunks of 64 and 76 rows, as a large matrix splits.
        let paired = HostMatrix::paired(&parts).expect("one format");
        let mut g = GpuMatrix::upload_chunked(&ctx, "gate_up", &paired, 64).unwrap();
        assert_eq!(g.chunks.len(), 3);
        g.paired = true;
        let w = paired.to_f32();
        for (name, kernels) in matmul_variants(&ctx) {
            for rows in [1usize, 2, 7, 9, 33, 70] {
                for act in [
                    Activation::Silu,
                    Activation::GeluTanh,
                    Activation::ClampedSwiglu,
                    Activation::Gelu,
                ] {
                    let x = randn(&mut r, rows * kdim, 2.0);
                    let (xb, yb) = (
                        buf_x(&ctx, &x, act == Activation::Silu),
                        ctx.storage("y", (rows * inter * 4) as u64),
                    );
                    let step = step_buffer(&ctx, rows as u32, 1, 0);
                    let args = MatmulArgs {
                        x: &xb,
                        w: &g,
                        bias: None,
                        y: &yb,
                        ldy: inter as u32,
                        out_offset: 0,
                        norm: Some((&gain_b, 1e-5)),
                        accumulate: false,
                        sample_rows: false,
                        map: OutputMap::Identity,
                        pairs: Some(Pairs::Glu(act)),
                    };
                    let mm = Matmul::new(&ctx, &kernels, &step, args).unwrap();
                    run(&ctx, |p| mm.record(p, rows as u32, 0));
                    let want: Vec<f32> = (0..rows)
                        .flat_map(|t| {
                            let xn = reference::rmsnorm(&x[t * kdim..(t + 1) * kdim], &gain, 1e-5);
                            let out = reference::matvec(&w, &xn);
                            (0..inter).map(move |j| {
                                let (g, u) = (out[2 * j] as f64, out[2 * j + 1] as f64);
                                reference::gated(act, g, u) as f32
                            })
                        })
                        .collect();
                    let what = format!("{format:?} {name} rows={rows} {act:?}");
                    let got = read_f32(&ctx, &yb, want.len());
                    let (atol, rtol) = tolerance(&kernels, 1e-4, 1e-4);
                    assert_close(&what, &got, &want, atol, rtol);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 3 * 2 * 6 * 2, "{checked} cases");
}

/// Interleaving keeps each row whole (blocks included) and refuses parts of two formats.
#[test]
fn pairing_interleaves_whole_rows() {
    let mut r = rng(32);
    let (rows, cols) = (3, 64);
    let (a, b) = (
        randn(&mut r, rows * cols, 1.0),
        randn(&mut r, rows * cols, 1.0),
    );
    let q8 = |w: &[f32]| {
        let d = WeightFormat::Q8_0.dtype();
        HostMatrix::from_stored(d, quantize(d, w), rows, cols).unwrap()
    };
    let paired = HostMatrix::paired(&[q8(&a), q8(&b)]).unwrap();
    let (wa, wb, wp) = (q8(&a).to_f32(), q8(&b).to_f32(), paired.to_f32());
    for j in 0..rows {
        assert_eq!(
            wp[2 * j * cols..(2 * j + 1) * cols],
            wa[j * cols..(j + 1) * cols]
        );
        assert_eq!(
            wp[(2 * j + 1) * cols..(2 * j + 2) * cols],
            wb[j * cols..(j + 1) * cols]
        );
    }
    let f16 = HostMatrix::from_f32(&b, rows, cols);
    assert!(HostMatrix::paired(&[q8(&a), f16]).is_none());
}
