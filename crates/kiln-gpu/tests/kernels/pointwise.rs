//! The per-row kernels between the matrix products: the gated activations (SwiGLU, GeGLU),
//! the activations of a MLP without a gate in place, the residual and gathered RMS norms,
//! and the LayerNorms.

use super::*;

/// The gated activations: SiLU (SwiGLU), GELU with the tanh approximation (GeGLU), gpt-oss's
/// clamped SwiGLU and exact GELU (the error function's approximation in the kernel against
/// the reference's series), on values large enough to reach both tails.
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
    // (gpt-oss's clamps bite: these values reach past +-7.)
    for act in [
        Activation::Silu,
        Activation::GeluTanh,
        Activation::ClampedSwiglu,
        Activation::Gelu,
    ] {
        let l = ops::glu(&ctx, &k, &step, (inter, act), &gub, &out);
        run_launches(&ctx, &[&l], t as u32, 0);
        let want: Vec<f32> = (0..t * inter)
            .map(|i| {
                let (row, c) = (i / inter, i % inter);
                let (g, u) = (
                    gu[row * 2 * inter + c] as f64,
                    gu[row * 2 * inter + inter + c] as f64,
                );
                reference::gated(act, g, u) as f32
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

/// The activation of a MLP without a gate in place, relu(x)^2 (where an adapter keeps it out
/// of the product's epilogue) and GELU (StarCoder2's tanh approximation, GPT-NeoX's exact
/// one: the epilogue has neither), over
/// the step's rows only: the rows past them keep their values.
#[test]
fn ungated_activation_matches_reference() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(5);
    let (rows, t, width) = (9, 6, 77);
    let y = randn(&mut r, rows * width, 3.0);
    for act in [Activation::Relu2, Activation::GeluTanh, Activation::Gelu] {
        let (step, yb) = (step_buffer(&ctx, t as u32, 1, 0), buf_f32(&ctx, &y));
        let l = ops::ungated(&ctx, &k, &step, (width, act), &yb).unwrap();
        run_launches(&ctx, &[&l], t as u32, 0);
        let want: Vec<f32> = (y.iter().enumerate())
            .map(|(i, &v)| match i < t * width {
                true => reference::activation(act, v as f64) as f32,
                false => v,
            })
            .collect();
        let got = read_f32(&ctx, &yb, rows * width);
        assert_close(&format!("ungated {act:?}"), &got, &want, 1e-6, 1e-6);
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

/// The final norm of the sampled rows, as an RMSNorm and (`centered`) as a LayerNorm without a
/// bias (Cohere's) and with one (StableLM's); the rows far from zero-mean, so that leaving the
/// mean in would show.
#[test]
fn gather_rmsnorm_matches_reference() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(4);
    let (t, hidden) = (11, 150);
    let x: Vec<f32> = randn(&mut r, t * hidden, 3.0)
        .into_iter()
        .map(|v| v + 2.5)
        .collect();
    let gain = randn(&mut r, hidden, 1.0);
    let bias = randn(&mut r, hidden, 0.5);
    let rows = [10u32, 0, 4];
    let step = step_buffer(&ctx, t as u32, 3, 3);
    let (rb, xb, gb, bb, out) = (
        buf_u32(&ctx, &rows),
        buf_f32(&ctx, &x),
        buf_f32(&ctx, &gain),
        buf_f32(&ctx, &bias),
        ctx.storage("out", (3 * hidden * 4) as u64),
    );
    for (centered, with_bias) in [(false, false), (true, false), (true, true)] {
        let shape = (hidden, 1e-6, centered);
        let b = with_bias.then_some(&bb);
        let l = ops::gather_rmsnorm(&ctx, &k, &step, shape, &rb, &xb, &gb, b, &out);
        run_launches(&ctx, &[&l], t as u32, 3);
        let want: Vec<f32> = rows
            .iter()
            .flat_map(|&row| {
                let row = &x[row as usize * hidden..(row as usize + 1) * hidden];
                match centered {
                    true => {
                        let b = with_bias.then_some(&bias[..]);
                        reference::layernorm_bias(row, &gain, b, 1e-6)
                    }
                    false => reference::rmsnorm(row, &gain, 1e-6),
                }
            })
            .collect();
        assert_close(
            &format!("gather_rmsnorm (centered: {centered}, bias: {with_bias})"),
            &read_f32(&ctx, &out, 3 * hidden),
            &want,
            1e-5,
            1e-4,
        );
    }
}

/// A LayerNorm of every token into a buffer of its own, without a bias (Cohere's) and with
/// one (StableLM's), against the CPU reference, on an awkward width (not a multiple of the 64
/// invocations) and rows with a large mean.
#[test]
fn layer_norm_matches_reference() {
    let ctx = gpu();
    let k = Kernels::new(&ctx);
    let mut r = rng(5);
    let (t, hidden) = (7, 330);
    let x: Vec<f32> = randn(&mut r, t * hidden, 2.0)
        .into_iter()
        .enumerate()
        .map(|(i, v)| v + (i / hidden) as f32 * 3.0 - 8.0)
        .collect();
    let gain = randn(&mut r, hidden, 1.0);
    let bias = randn(&mut r, hidden, 0.5);
    let step = step_buffer(&ctx, t as u32, 1, 1);
    let (xb, gb, bb, out) = (
        buf_f32(&ctx, &x),
        buf_f32(&ctx, &gain),
        buf_f32(&ctx, &bias),
        ctx.storage("out", (t * hidden * 4) as u64),
    );
    for with_bias in [false, true] {
        let b = with_bias.then_some(&bb);
        let l = ops::layer_norm(&ctx, &k, &step, (hidden, 1e-5), &xb, &gb, b, &out);
        run_launches(&ctx, &[&l], t as u32, 1);
        let want: Vec<f32> = x
            .chunks(hidden)
            .flat_map(|row| {
                reference::layernorm_bias(row, &gain, with_bias.then_some(&bias[..]), 1e-5)
            })
            .collect();
        assert_close(
            &format!("layer_norm (bias: {with_bias})"),
            &read_f32(&ctx, &out, t * hidden),
            &want,
            1e-5,
            1e-4,
        );
    }
}
