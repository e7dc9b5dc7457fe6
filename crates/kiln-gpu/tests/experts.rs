//! A mixture of experts' launches against the CPU: the router's choice and weights
//! (`moe_route.wgsl`, ties included), and the products with the chosen experts' matrices
//! (`moe_matvec.wgsl` a token at a time, and where subgroups allow `moe_group.wgsl`'s listing
//! by expert with `moe_matmul_subgroup.wgsl`'s tiles of an expert's tokens): gate and up with
//! the RMSNorm and the gated activation into a row for each token's expert, and down weighted
//! and summed into the residual, for float and quantized matrices, at awkward token counts,
//! whole and split over buffers within experts; and gpt-oss's experts (each one's biases on
//! gate, up and down, and its clamped SwiGLU).

mod common;

use common::*;
use kiln_gpu::ops::{self, ExpertProduct, Routing};
use kiln_gpu::reference;
use kiln_gpu::{GpuMatrix, HostMatrix, Kernels, WeightFormat};
use kiln_model::testing::quantize;
use kiln_model::{Activation, Moe, Scoring};

fn host(format: WeightFormat, w: &[f32], rows: usize, cols: usize) -> HostMatrix {
    match format {
        WeightFormat::F16 => HostMatrix::from_f32(w, rows, cols),
        f => HostMatrix::from_stored(f.dtype(), quantize(f.dtype(), w), rows, cols).unwrap(),
    }
}

/// Softmax and sigmoid scoring, choosing by the scores or by the scores plus each expert's
/// bias (then scaled by 2.5), renormalized or not, over logits in rows one wider than the experts (a shared
/// expert's gate column after them, which must not be chosen).
#[test]
fn router_chooses_as_the_cpu_does() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(41);
    let (t, experts) = (13, 7);
    let stride = experts + 1;
    let mut logits = randn(&mut r, t * stride, 2.0);
    // Ties: token 0's experts 2 and 5, token 1's all equal; every gate column the largest.
    logits[5] = logits[2];
    logits[stride..stride + experts].fill(0.5);
    (0..t).for_each(|i| logits[i * stride + experts] = 10.0);
    let bias = randn(&mut r, experts, 0.3);
    for (slots, normalize, scoring, biased) in [
        (3, true, Scoring::Softmax, false),
        (3, false, Scoring::Softmax, false),
        (1, true, Scoring::Softmax, false),
        (7, false, Scoring::Softmax, false),
        (3, true, Scoring::Softmax, true),
        (3, true, Scoring::Sigmoid, true),
        (2, false, Scoring::Sigmoid, true),
        (2, false, Scoring::Sigmoid, false),
    ] {
        let moe = Moe {
            scoring,
            choice_bias: biased,
            scale: if biased { 2.5 } else { 1.0 },
            ..Moe::softmax(experts, slots, 8, normalize)
        };
        let (lb, ids, weights) = (
            buf_f32(&ctx, &logits),
            ctx.storage("ids", (t * slots * 4) as u64),
            ctx.storage("weights", (t * slots * 4) as u64),
        );
        let bias_b = buf_f32(&ctx, &bias);
        let step = step_buffer(&ctx, t as u32, 1, 0);
        let routing = Routing {
            ids: &ids,
            weights: &weights,
        };
        let router = ops::RouterLogits {
            logits: &lb,
            stride,
        };
        let b = biased.then_some(&bias_b);
        let l = ops::moe_route(&ctx, &k, &step, &moe, router, b, &routing).unwrap();
        run_launches(&ctx, &[&l], t as u32, 0);
        let (got_ids, got_w) = (
            read_u32(&ctx, &ids, t * slots),
            read_f32(&ctx, &weights, t * slots),
        );
        let bias = biased.then_some(&bias[..]);
        let want: Vec<(usize, f32)> = (0..t)
            .flat_map(|i| reference::route(&logits[i * stride..][..experts], bias, &moe))
            .collect();
        let want_ids: Vec<u32> = want.iter().map(|w| w.0 as u32).collect();
        let want_w: Vec<f32> = want.iter().map(|w| w.1).collect();
        let case = format!("{slots} slots, normalize {normalize}, {scoring:?}, bias {biased}");
        assert_eq!(got_ids, want_ids, "{case}");
        assert_close(&case, &got_w, &want_w, 1e-6, 1e-5);
    }
}

/// A gated shared expert's activations scaled by the sigmoid of each token's gate column.
#[test]
fn shared_gate_scales_each_row_by_its_sigmoid() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(43);
    let (t, stride, width) = (11, 6, 37);
    let logits = randn(&mut r, t * stride, 2.0);
    let act = randn(&mut r, t * width, 1.0);
    let act_b = buf_f32(&ctx, &act);
    let lb = buf_f32(&ctx, &logits);
    let step = step_buffer(&ctx, t as u32, 1, 0);
    let router = ops::RouterLogits {
        logits: &lb,
        stride,
    };
    let l = ops::moe_shared_gate(&ctx, &k, &step, router, stride - 1, (&act_b, width));
    run_launches(&ctx, &[&l], t as u32, 0);
    let want: Vec<f32> = (0..t * width)
        .map(|i| {
            let g = logits[(i / width) * stride + stride - 1] as f64;
            (act[i] as f64 / (1.0 + (-g).exp())) as f32
        })
        .collect();
    assert_close(
        "gated",
        &read_f32(&ctx, &act_b, t * width),
        &want,
        1e-6,
        1e-5,
    );
}

/// Gate/up then down through the chosen experts, for every token count and format, against
/// `act(rmsnorm(x) . gate_e) * (rmsnorm(x) . up_e)` and the weighted sum of `down_e . a`,
/// through the per-token product and the grouped one.
#[test]
fn expert_products_match_the_cpu() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    if !k.moe_grouped {
        // lavapipe has subgroups of 8: the kernel CPU adapters get must be the one tested.
        assert!(
            !ctx.cpu_adapter(),
            "no grouped expert product on this CPU adapter"
        );
        eprintln!("subgroups narrower than 8: moe_matmul_subgroup.wgsl not tested");
    }
    let mut r = rng(42);
    let (experts, slots) = (5, 2);
    let mut checked = 0;
    // Widths of a multiple of 8 for float matrices; of 256 for the K-quants' blocks.
    for (format, hidden, inter) in [
        (WeightFormat::F16, 72, 40),
        (WeightFormat::Q8_0, 96, 64),
        (WeightFormat::Q4_1, 64, 32),
        (WeightFormat::MXFP4, 96, 64),
        (WeightFormat::IQ4_NL, 64, 96),
        (WeightFormat::IQ4_XS, 256, 256),
        (WeightFormat::Q2_K, 256, 256),
        (WeightFormat::Q3_K, 256, 256),
        (WeightFormat::Q4_K, 256, 256),
        (WeightFormat::Q6_K, 256, 256),
    ] {
        let gain = randn(&mut r, hidden, 1.0);
        let gain_b = buf_f32(&ctx, &gain);
        let gate_up = [
            host(
                format,
                &randn(&mut r, experts * inter * hidden, 0.5),
                experts * inter,
                hidden,
            ),
            host(
                format,
                &randn(&mut r, experts * inter * hidden, 0.5),
                experts * inter,
                hidden,
            ),
        ];
        let paired = HostMatrix::paired(&gate_up).expect("one format");
        let (g, u) = (gate_up[0].to_f32(), gate_up[1].to_f32());
        let down_h = host(
            format,
            &randn(&mut r, experts * hidden * inter, 0.5),
            experts * hidden,
            inter,
        );
        let d = down_h.to_f32();
        // Whole, and in chunks of 64 rows (as a stack larger than a binding splits: within
        // experts, whose rows are not multiples of 64).
        // 90 tokens: two tiles of some experts' tokens in a slot.
        let cases = [
            (1usize, false),
            (3, true),
            (17, false),
            (5, true),
            (90, true),
        ];
        let paths = [false, true].into_iter().filter(|&g| !g || k.moe_grouped);
        for ((t, split), grouped_path) in cases
            .into_iter()
            .flat_map(|c| paths.clone().map(move |g| (c, g)))
        {
            // Down's outputs scaled into the residual stream (Granite's multiplier) on some.
            let scale = if t == 3 || t == 17 { 1.6 } else { 1.0 };
            let upload = |m: &HostMatrix| match split {
                true => GpuMatrix::upload_chunked(&ctx, "experts", m, 64).unwrap(),
                false => GpuMatrix::upload_host(&ctx, "experts", m).unwrap(),
            };
            let mut gu = upload(&paired);
            gu.paired = true;
            let dw = upload(&down_h);
            assert_eq!(gu.chunks.len() > 1, split);
            let x = randn(&mut r, t * hidden, 2.0);
            let residual = randn(&mut r, t * hidden, 1.0);
            // Each token's experts, distinct (in no regular order), and weights.
            let ids: Vec<u32> = (0..t)
                .flat_map(|i| {
                    let first = (7 * i + i * i / 3) % experts;
                    let second = (first + 1 + i % (experts - 1)) % experts;
                    [first as u32, second as u32]
                })
                .collect();
            let weights: Vec<f32> = (0..t * slots).map(|i| 0.3 + 0.1 * (i % 4) as f32).collect();
            // gpt-oss's experts on some: biases large enough that the activation's clamps
            // (gate above 7, up at +-7) bite.
            let oss = matches!(t, 1 | 3 | 90);
            let act_kind = if oss {
                Activation::ClampedSwiglu
            } else {
                Activation::Silu
            };
            let gu_bias = randn(&mut r, 2 * experts * inter, 4.0);
            let down_bias = randn(&mut r, experts * hidden, 1.0);
            let (gi, ui) = gu_bias.split_at(experts * inter);
            let paired_bias: Vec<f32> = gi.iter().zip(ui).flat_map(|(&g, &u)| [g, u]).collect();
            let (gu_bias_b, down_bias_b) = (buf_f32(&ctx, &paired_bias), buf_f32(&ctx, &down_bias));
            let (xb, idb, wb) = (
                buf_f32(&ctx, &x),
                buf_u32(&ctx, &ids),
                buf_f32(&ctx, &weights),
            );
            let act = ctx.storage("act", (t * slots * inter * 4) as u64);
            let yb = buf_f32(&ctx, &residual);
            let step = step_buffer(&ctx, t as u32, 1, 0);
            let routing = Routing {
                ids: &idb,
                weights: &wb,
            };
            let gate_up = ExpertProduct {
                x: &xb,
                norm: Some((&gain_b, 1e-5)),
                w: &gu,
                rows_per_expert: 2 * inter,
                y: &act,
                glu: Some(act_kind),
                scale: 1.0,
                bias: oss.then_some(&gu_bias_b),
            };
            let down = ExpertProduct {
                x: &act,
                norm: None,
                w: &dw,
                rows_per_expert: hidden,
                y: &yb,
                glu: None,
                scale,
                bias: oss.then_some(&down_bias_b),
            };
            let mut launches = Vec::new();
            if grouped_path {
                // From any number of tokens, so that tiles of one token run too.
                let groups = ops::ExpertGroups::new(&ctx, experts, slots, t);
                launches.push(ops::moe_group(&ctx, &k, &step, 0, &routing, &groups).unwrap());
                for a in [gate_up, down] {
                    let l = ops::expert_matmul(&ctx, &k, 0, &routing, &groups, a);
                    launches.extend(l.unwrap());
                }
            } else {
                for a in [gate_up, down] {
                    let all = (slots, u32::MAX);
                    launches.extend(ops::expert_matvec(&ctx, &k, &step, all, &routing, a).unwrap());
                }
            }
            run_launches(&ctx, &launches.iter().collect::<Vec<_>>(), t as u32, 0);
            let mut want_act = Vec::new();
            let mut want_y = residual.clone();
            for i in 0..t {
                let xn = reference::rmsnorm(&x[i * hidden..][..hidden], &gain, 1e-5);
                for j in 0..slots {
                    let e = ids[i * slots + j] as usize;
                    let mut gate =
                        reference::matvec(&g[e * inter * hidden..][..inter * hidden], &xn);
                    let mut upv =
                        reference::matvec(&u[e * inter * hidden..][..inter * hidden], &xn);
                    let a: Vec<f32> = (0..inter)
                        .map(|o| {
                            if oss {
                                gate[o] += gi[e * inter + o];
                                upv[o] += ui[e * inter + o];
                            }
                            reference::gated(act_kind, gate[o] as f64, upv[o] as f64) as f32
                        })
                        .collect();
                    let mut y = reference::matvec(&d[e * hidden * inter..][..hidden * inter], &a);
                    if oss {
                        (y.iter_mut().zip(&down_bias[e * hidden..][..hidden]))
                            .for_each(|(y, b)| *y += b);
                    }
                    let w = weights[i * slots + j];
                    (want_y[i * hidden..][..hidden].iter_mut().zip(y))
                        .for_each(|(o, y)| *o += w * y * scale);
                    want_act.extend(a);
                }
            }
            let what =
                format!("{format:?} tokens={t} split={split} grouped={grouped_path} oss={oss}");
            let got_act = read_f32(&ctx, &act, want_act.len());
            assert_close(&format!("{what} gate/up"), &got_act, &want_act, 1e-4, 1e-4);
            let got_y = read_f32(&ctx, &yb, want_y.len());
            assert_close(&format!("{what} down"), &got_y, &want_y, 1e-3, 1e-4);
            checked += 1;
        }
    }
    let paths = if k.moe_grouped { 2 } else { 1 };
    assert_eq!(checked, 50 * paths);
}
