//! Shared test helpers: the device (a test fails, never skips, when there is none), seeded
//! random data and tolerant comparison that names the first bad index.
#![allow(dead_code)]

use kiln_gpu::{GpuContext, Launch, Recorded, StepUniform};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub fn gpu() -> GpuContext {
    match pollster::block_on(GpuContext::new()) {
        Ok(ctx) => ctx,
        Err(e) => panic!("GPU tests need an adapter and none was found: {e}"),
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

pub fn randn(r: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (r.random::<f32>() * 2.0 - 1.0) * scale)
        .collect()
}

pub fn f16_round(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect()
}

/// Fails with the first index where |a - b| > atol + rtol * |b|.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= atol + rtol * w.abs() && g.is_finite(),
            "{what}: index {i}: got {g}, want {w} (atol {atol}, rtol {rtol})"
        );
    }
}

pub fn step_buffer(ctx: &GpuContext, tokens: u32, seqs: u32, samples: u32) -> wgpu::Buffer {
    ctx.uniform_init(
        "step",
        bytemuck::bytes_of(&StepUniform {
            num_tokens: tokens,
            num_seqs: seqs,
            num_samples: samples,
            num_prev: 0,
        }),
    )
}

pub fn buf_f32(ctx: &GpuContext, data: &[f32]) -> wgpu::Buffer {
    ctx.storage_init("test", bytemuck::cast_slice(data))
}

/// The input x of a product, followed by [`kiln_gpu::ops::X_HEAD_BYTES`] of slack when `head`
/// is set: the subgroup matrix kernel then reads steps whose rows lie in its uniform bindings
/// of x through them, and through the storage binding otherwise.
pub fn buf_x(ctx: &GpuContext, data: &[f32], head: bool) -> wgpu::Buffer {
    let bytes = std::mem::size_of_val(data) as u64;
    let size = if head {
        bytes + kiln_gpu::ops::X_HEAD_BYTES
    } else {
        bytes
    };
    let b = ctx.storage("x", size);
    ctx.write(&b, 0, bytemuck::cast_slice(data));
    b
}

pub fn buf_u32(ctx: &GpuContext, data: &[u32]) -> wgpu::Buffer {
    ctx.storage_init("test", bytemuck::cast_slice(data))
}

/// Records `record` into one pass and submits it; fails on any validation error so far (a
/// kernel that does not compile must not pass as one whose output happens to be checked late).
pub fn run<R>(ctx: &GpuContext, record: impl FnOnce(&mut wgpu::ComputePass<'_>) -> R) {
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        record(&mut pass);
    }
    ctx.queue.submit([enc.finish()]);
    let errors = ctx.faults.take_errors();
    assert!(errors.is_empty(), "wgpu errors: {errors:#?}");
}

pub fn run_launches(ctx: &GpuContext, launches: &[&Launch], tokens: u32, samples: u32) {
    run(ctx, |pass| {
        launches.iter().for_each(|l| {
            l.record(pass, tokens, samples);
        })
    });
}

pub fn read_f32(ctx: &GpuContext, b: &wgpu::Buffer, n: usize) -> Vec<f32> {
    bytemuck::cast_slice(&pollster::block_on(ctx.read(b, 0, n as u64 * 4)).unwrap()).to_vec()
}

pub fn read_u32(ctx: &GpuContext, b: &wgpu::Buffer, n: usize) -> Vec<u32> {
    bytemuck::cast_slice(&pollster::block_on(ctx.read(b, 0, n as u64 * 4)).unwrap()).to_vec()
}

/// Every way of running a weight matrix product: the row-wise family; the tiled family with
/// `matvec.wgsl` for up to 8 rows; and, where the adapter has subgroups (lavapipe has), the
/// tiled family with `matvec_subgroup.wgsl` for up to 64 rows, at two workgroup widths and
/// with f16 and Q4_K weights read 16 and 4 bytes at a time; and, where the device has
/// cooperative matrices, `matmul_coop.wgsl` from 2 rows. Each with a name for messages.
pub fn matmul_variants(ctx: &GpuContext) -> Vec<(String, kiln_gpu::Kernels)> {
    let mut out = Vec::new();
    let rowwise = kiln_gpu::Kernels::with_rowwise(ctx, true);
    if rowwise.rowwise_subgroups {
        out.push(("row-wise, subgroup kernel".to_string(), rowwise));
    } else {
        // lavapipe has subgroups of 8: the kernel CPU adapters get must be the one tested.
        assert!(
            !ctx.cpu_adapter(),
            "no subgroup row-wise kernel on this CPU adapter"
        );
        eprintln!("subgroups narrower than 8: matmul_rowwise_subgroup.wgsl not tested");
    }
    let mut plain_rows = kiln_gpu::Kernels::with_rowwise(ctx, true);
    plain_rows.rowwise_subgroups = false;
    out.push(("row-wise".to_string(), plain_rows));
    let mut plain = kiln_gpu::Kernels::with_rowwise(ctx, false);
    plain.matvec_rows = None;
    out.push(("tiled, matvec".to_string(), plain));
    let subgroups = kiln_gpu::Kernels::with_rowwise(ctx, false);
    match subgroups.matvec_rows {
        Some(rows) => {
            // The other workgroup width this adapter's subgroups allow (16 partial sums at
            // most), with f16 and Q4_K weights read 4 bytes at a time rather than 16.
            let mut other = kiln_gpu::Kernels::with_rowwise(ctx, false);
            let widest = (ctx.info.subgroup_min_size * 16).min(256);
            other.matvec_workgroup = if subgroups.matvec_workgroup == 64 && widest > 64 {
                widest
            } else {
                64
            };
            other.wide_loads = Vec::new();
            // The default reads f16 16 bytes at a time; Q4_K's wide reader is tested here.
            let mut subgroups = subgroups;
            subgroups.wide_loads = vec![kiln_gpu::WeightFormat::F16, kiln_gpu::WeightFormat::Q4_K];
            let wg = subgroups.matvec_workgroup;
            out.push((
                format!("tiled, subgroup matvec <= {rows}, workgroup {wg}"),
                subgroups,
            ));
            let wg = other.matvec_workgroup;
            out.push((
                format!("tiled, subgroup matvec <= {rows}, workgroup {wg}, 4-byte loads"),
                other,
            ));
        }
        None => eprintln!("this adapter has no subgroups: matvec_subgroup.wgsl not tested"),
    }
    match ctx.cooperative_matrix {
        Some(listed) => {
            // Every product of 2 rows or more on cooperative matrices: of the side the adapter
            // lists, and on a CPU adapter (lavapipe, which lists 8 x 8 but runs any side) also
            // of the 16 x 16 that NVIDIA's and AMD's drivers list, wider than its subgroups.
            let sides = if ctx.cpu_adapter() && listed != 16 {
                vec![listed, 16]
            } else {
                vec![listed]
            };
            for side in sides {
                let mut coop = kiln_gpu::Kernels::with_rowwise(ctx, false);
                coop.cooperative = Some(side);
                coop.matvec_rows = coop.matvec_rows.map(|_| 1);
                out.push((format!("cooperative matrices {side}x{side}"), coop));
            }
        }
        None => {
            // scripts/test-cooperative.sh runs these suites on a lavapipe that has them.
            let expected = std::env::var_os("KILN_EXPECT_COOPERATIVE_MATRIX").is_some();
            assert!(
                !expected,
                "KILN_EXPECT_COOPERATIVE_MATRIX: the adapter has none"
            );
            eprintln!("no cooperative matrices on this adapter: matmul_coop.wgsl not tested");
        }
    }
    out
}

/// The tolerance of a product checked against the f32 reference with `kernels`: wider where
/// they multiply on cooperative matrices, whose inputs are rounded to f16.
pub fn tolerance(kernels: &kiln_gpu::Kernels, atol: f32, rtol: f32) -> (f32, f32) {
    match kernels.cooperative {
        Some(_) => (atol.max(2e-2), rtol.max(1e-2)),
        None => (atol, rtol),
    }
}

/// `y = x w^T` for random `x` of each row count in `rows`, with every kernel variant, against
/// the CPU product with `w` (`(n, k)` f32, what the GPU matrix `g` holds).
pub fn check_plain_product(
    ctx: &GpuContext,
    what: &str,
    g: &kiln_gpu::GpuMatrix,
    w: &[f32],
    rows: &[usize],
    r: &mut StdRng,
    (atol, rtol): (f32, f32),
) {
    let (n, k) = (g.rows, g.cols);
    for (name, kernels) in matmul_variants(ctx) {
        for &rows in rows {
            let x = randn(r, rows * k, 1.0);
            let (xb, yb) = (buf_f32(ctx, &x), ctx.storage("y", (rows * n * 4) as u64));
            let step = step_buffer(ctx, rows as u32, 1, 0);
            let args = kiln_gpu::ops::MatmulArgs {
                x: &xb,
                w: g,
                bias: None,
                y: &yb,
                ldy: n as u32,
                out_offset: 0,
                norm: None,
                accumulate: false,
                sample_rows: false,
                map: kiln_gpu::ops::OutputMap::Identity,
                pairs: None,
            };
            let mm = kiln_gpu::ops::Matmul::new(ctx, &kernels, &step, args).unwrap();
            run(ctx, |p| mm.record(p, rows as u32, 0));
            let want: Vec<f32> = (0..rows)
                .flat_map(|t| kiln_gpu::reference::matvec(w, &x[t * k..(t + 1) * k]))
                .collect();
            let got = read_f32(ctx, &yb, want.len());
            let (atol, rtol) = tolerance(&kernels, atol, rtol);
            let what = format!("{what} {name} rows={rows}");
            assert_close(&what, &got, &want, atol, rtol);
        }
    }
}

/// A head (or a run of heads of `d`) from the checkpoint's order into the rotary pair layout
/// ([`kiln_gpu::ops::paired_row`]).
pub fn pair_layout(v: &[f32], d: usize) -> Vec<f32> {
    (0..v.len())
        .map(|r| v[kiln_gpu::ops::paired_row(r, d, d)])
        .collect()
}

/// The inverse of [`pair_layout`].
pub fn checkpoint_layout(v: &[f32], d: usize) -> Vec<f32> {
    let mut out = vec![0f32; v.len()];
    for (r, x) in v.iter().enumerate() {
        out[kiln_gpu::ops::paired_row(r, d, d)] = *x;
    }
    out
}
