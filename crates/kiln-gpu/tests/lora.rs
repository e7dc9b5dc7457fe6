//! LoRA adapters' launches (`lora_shrink.wgsl`, `lora_expand.wgsl`) against the CPU: a stack
//! of three parts (q, k, v) whose q and k rows lie in the rotary pair layout, three adapters
//! (one adapting every part at rank 3, one only k at rank 5, one none of them), tokens
//! through each of them and through none in one launch, awkward widths, with and without the
//! RMSNorm the normed products apply: `y += B_part (A_part x')` for each token's adapter.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use kiln_gpu::ops::{Lora, LoraBuffers, LoraStack, paired_row};
use kiln_gpu::{KernelFamily, Kernels, Recorded, reference};
use kiln_model::{LoraAdapter, LoraPair};

const NONE: u32 = u32::MAX;

#[test]
fn adapters_add_their_products_to_the_tokens_that_run_through_them() {
    let ctx = gpu();
    let kernels = Kernels::for_family(&ctx, KernelFamily::Auto);
    let mut r = rng(41);
    let (cols, d) = (45, 6);
    let parts = [("q", 4 * d), ("k", 2 * d), ("v", 2 * d)];
    let rows: usize = parts.iter().map(|p| p.1).sum();
    let qk = 6 * d;
    let source = |row: usize| if row < qk { paired_row(row, d) } else { row };
    let mut pair = |rank: usize, out: usize| LoraPair {
        rank,
        a: randn(&mut r, rank * cols, 0.5),
        b: randn(&mut r, out * rank, 0.5),
    };
    let adapter = |name: &str, pairs: Vec<(&str, LoraPair)>| {
        Arc::new(LoraAdapter {
            name: name.into(),
            path: Default::default(),
            rank: pairs.iter().map(|p| p.1.rank).max().unwrap_or(1),
            pairs: pairs
                .into_iter()
                .map(|(n, p)| (n.to_string(), p))
                .collect::<HashMap<_, _>>(),
            fingerprint: 0,
        })
    };
    let adapters = vec![
        adapter(
            "all",
            vec![
                ("q", pair(3, 4 * d)),
                ("k", pair(3, 2 * d)),
                ("v", pair(3, 2 * d)),
            ],
        ),
        adapter("k", vec![("k", pair(5, 2 * d))]),
        adapter("other", vec![("o", pair(2, 7))]),
    ];
    let stack = LoraStack::new(&adapters, &parts, cols, source).expect("adapted");
    // A full tile of 8 rows through all three and none, and a partial one.
    let slots = [NONE, 0, 1, 2, 0, NONE, 1, 0, 0, 0, 1];
    let tokens = slots.len();
    let x = randn(&mut r, tokens * cols, 2.0);
    let gain = randn(&mut r, cols, 1.0);
    let y0 = randn(&mut r, tokens * rows, 1.0);
    for normed in [false, true] {
        let (xb, gb, yb) = (buf_f32(&ctx, &x), buf_f32(&ctx, &gain), buf_f32(&ctx, &y0));
        let (sb, tb) = (
            buf_u32(&ctx, &slots),
            ctx.storage("t", (tokens * 16 * 4) as u64),
        );
        let step = step_buffer(&ctx, tokens as u32, 1, 0);
        let lora = Lora::new(
            &ctx,
            &kernels,
            &stack,
            LoraBuffers {
                step: &step,
                slots: &sb,
                x: &xb,
                norm: normed.then_some((&gb, 1e-5)),
                y: &yb,
                ldy: rows as u32,
                t: &tb,
            },
        );
        run(&ctx, |p| lora.record(p, tokens as u32, 0));
        let mut want = y0.clone();
        for (t, &slot) in slots.iter().enumerate() {
            let Some(ad) = adapters.get(slot as usize) else {
                continue;
            };
            let xt = &x[t * cols..(t + 1) * cols];
            let xn = match normed {
                true => reference::rmsnorm(xt, &gain, 1e-5),
                false => xt.to_vec(),
            };
            for row in 0..rows {
                let src = source(row);
                let (name, start) = match src {
                    s if s < 4 * d => ("q", 0),
                    s if s < 6 * d => ("k", 4 * d),
                    _ => ("v", 6 * d),
                };
                let Some(p) = ad.pairs.get(name) else {
                    continue;
                };
                let ax = reference::matvec(&p.a, &xn);
                let local = src - start;
                let delta: f32 = (0..p.rank).map(|q| p.b[local * p.rank + q] * ax[q]).sum();
                want[t * rows + row] += delta;
            }
        }
        let got = read_f32(&ctx, &yb, want.len());
        assert_close(&format!("normed {normed}"), &got, &want, 1e-4, 1e-4);
        // Rows without an adapter, or through one that leaves the stack alone, are untouched.
        for t in [0, 3, 5] {
            assert_eq!(got[t * rows..(t + 1) * rows], y0[t * rows..(t + 1) * rows]);
        }
    }
}

#[test]
fn a_stack_no_adapter_touches_has_no_launches() {
    let adapter = Arc::new(LoraAdapter {
        name: "o".into(),
        path: Default::default(),
        rank: 2,
        pairs: HashMap::from([(
            "o".to_string(),
            LoraPair {
                rank: 2,
                a: vec![0.0; 2 * 8],
                b: vec![0.0; 8 * 2],
            },
        )]),
        fingerprint: 0,
    });
    assert!(LoraStack::new(&[adapter], &[("q", 8), ("k", 8)], 8, |r| r).is_none());
}
