//! LoRA adapters' launches (`lora_shrink.wgsl`, `lora_expand.wgsl`) against the CPU: a stack
//! of three parts (q, k, v) whose q and k rows lie in the rotary pair layout, three adapters
//! (one adapting every part at rank 3, one only k at rank 5, one none of them), tokens
//! through each of them and through none in one launch (a full tile of rows and a partial
//! one), awkward widths, with and without the RMSNorm the normed products apply:
//! `y += B_part (A_part x')` for each token's adapter (A and B of values f16 holds, as the
//! stacks keep them). And slots rewritten in place: a stack
//! with room for adapters loaded later, loaded, emptied and loaded again.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use kiln_gpu::ops::{Lora, LoraBuffers, LoraCapacity, LoraShape, paired_row};
use kiln_gpu::{GpuContext, KernelFamily, Kernels, Recorded, reference};
use kiln_model::{LoraAdapter, LoraPair};
use rand::rngs::StdRng;

const NONE: u32 = u32::MAX;
const COLS: usize = 45;
const D: usize = 6;
const PARTS: [(&str, usize); 3] = [("q", 4 * D), ("k", 2 * D), ("v", 2 * D)];
const ROWS: usize = 8 * D;

/// The stack's output row `row` holds stacked row `source(row)`: q and k in pair layout.
fn source(row: usize) -> usize {
    if row < 6 * D {
        paired_row(row, D, D)
    } else {
        row
    }
}

fn adapter(r: &mut StdRng, name: &str, pairs: &[(&str, usize, usize)]) -> Arc<LoraAdapter> {
    let pairs: HashMap<String, LoraPair> = (pairs.iter())
        .map(|&(n, rank, out)| {
            // Values f16 holds, as the stacks store them.
            let pair = LoraPair {
                rank,
                a: f16_round(&randn(r, rank * COLS, 0.5)),
                b: f16_round(&randn(r, out * rank, 0.5)),
            };
            (n.to_string(), pair)
        })
        .collect();
    Arc::new(LoraAdapter::from_pairs(name, pairs))
}

/// The three adapters: every part at rank 3, k at rank 5, none of the stack's parts.
fn three(r: &mut StdRng) -> Vec<Arc<LoraAdapter>> {
    vec![
        adapter(
            r,
            "all",
            &[("q", 3, 4 * D), ("k", 3, 2 * D), ("v", 3, 2 * D)],
        ),
        adapter(r, "k", &[("k", 5, 2 * D)]),
        adapter(r, "other", &[("o", 2, 7)]),
    ]
}

/// Runs `lora` on `tokens` rows of x through `slots` and checks each row against the CPU with
/// `held[slot]` the adapter in each slot.
fn check(
    ctx: &GpuContext,
    make: &dyn Fn(LoraBuffers) -> Lora,
    held: &[Option<Arc<LoraAdapter>>],
    slots: &[u32],
    r: &mut StdRng,
    what: &str,
) -> Lora {
    let tokens = slots.len();
    let x = randn(r, tokens * COLS, 2.0);
    let gain = randn(r, COLS, 1.0);
    let y0 = randn(r, tokens * ROWS, 1.0);
    let mut kept = None;
    for normed in [false, true] {
        let (xb, gb, yb) = (buf_f32(ctx, &x), buf_f32(ctx, &gain), buf_f32(ctx, &y0));
        let (sb, tb) = (
            buf_u32(ctx, slots),
            ctx.storage("t", (tokens * 32 * 4) as u64),
        );
        let step = step_buffer(ctx, tokens as u32, 1, 0);
        let lora = make(LoraBuffers {
            step: &step,
            slots: &sb,
            x: &xb,
            norm: normed.then_some((&gb, 1e-5)),
            y: &yb,
            ldy: ROWS as u32,
            t: &tb,
        });
        run(ctx, |p| lora.record(p, tokens as u32, 0));
        let mut want = y0.clone();
        for (t, &slot) in slots.iter().enumerate() {
            let Some(Some(ad)) = held.get(slot as usize) else {
                continue;
            };
            let xt = &x[t * COLS..(t + 1) * COLS];
            let xn = match normed {
                true => reference::rmsnorm(xt, &gain, 1e-5),
                false => xt.to_vec(),
            };
            for row in 0..ROWS {
                let src = source(row);
                let (name, start) = match src {
                    s if s < 4 * D => ("q", 0),
                    s if s < 6 * D => ("k", 4 * D),
                    _ => ("v", 6 * D),
                };
                let Some(p) = ad.pairs().unwrap().get(name).cloned() else {
                    continue;
                };
                let ax = reference::matvec(&p.a, &xn);
                let local = src - start;
                let delta: f32 = (0..p.rank).map(|q| p.b[local * p.rank + q] * ax[q]).sum();
                want[t * ROWS + row] += delta;
            }
        }
        let got = read_f32(ctx, &yb, want.len());
        assert_close(&format!("{what}, normed {normed}"), &got, &want, 1e-4, 1e-4);
        kept = Some(lora);
    }
    kept.unwrap()
}

#[test]
fn adapters_add_their_products_to_the_tokens_that_run_through_them() {
    let ctx = gpu();
    let kernels = Kernels::for_family(&ctx, KernelFamily::Auto);
    let mut r = rng(41);
    let adapters = three(&mut r);
    let make = |b: LoraBuffers| {
        let shape = LoraShape::new(&adapters, &PARTS, COLS, None).expect("adapted");
        Lora::new(&ctx, &kernels, shape, &adapters, &source, b).unwrap()
    };
    let held: Vec<_> = adapters.iter().cloned().map(Some).collect();
    // A full tile of 8 rows through all three and none, and a partial one.
    let slots = [NONE, 0, 1, 2, 0, NONE, 1, 0, 0, 0, 1];
    check(&ctx, &make, &held, &slots, &mut r, "three adapters");
}

#[test]
fn slots_are_rewritten_in_place() {
    let ctx = gpu();
    let kernels = Kernels::for_family(&ctx, KernelFamily::Auto);
    let mut r = rng(42);
    let adapters = three(&mut r);
    let capacity = LoraCapacity { slots: 3, rank: 5 };
    // Built empty, with room for three adapters of rank 5 a matrix, then written slot by
    // slot: loaded, emptied, loaded with another.
    let plan: [&[(usize, Option<usize>)]; 3] = [
        &[(1, Some(0)), (2, Some(1))],
        &[(1, None)],
        &[(1, Some(1)), (0, Some(2)), (2, Some(0))],
    ];
    let mut held = vec![None, None, None];
    for (i, writes) in plan.iter().enumerate() {
        for &(slot, a) in writes.iter() {
            held[slot] = a.map(|a| adapters[a].clone());
        }
        let make = |b: LoraBuffers| {
            let shape = LoraShape::new(&[], &PARTS, COLS, Some(capacity)).expect("room");
            let lora = Lora::new(&ctx, &kernels, shape, &[], &source, b).unwrap();
            for &(slot, a) in plan.iter().take(i + 1).flat_map(|w| w.iter()) {
                let a = a.map(|a| &*adapters[a]);
                if let Some(a) = a {
                    lora.shape().check(a).unwrap();
                }
                let pairs = a.map(|a| a.pairs().unwrap());
                lora.set_slot(&ctx, slot, pairs.as_deref(), &source);
            }
            lora
        };
        let slots = [0, 1, 2, NONE, 1, 2, 0, 1, 2];
        let what = format!("after writes {i}: {writes:?}");
        check(&ctx, &make, &held, &slots, &mut r, &what);
    }
    // An adapter whose ranks exceed the room is refused before anything is written.
    let big = adapter(&mut r, "big", &[("q", 6, 4 * D)]);
    let shape = LoraShape::new(&[], &PARTS, COLS, Some(capacity)).unwrap();
    assert!(
        shape.check(&big).is_ok(),
        "6 of the stack's 3 x 5, padded to 16"
    );
    let bigger = adapter(&mut r, "bigger", &[("q", 9, 4 * D), ("k", 9, 2 * D)]);
    let err = shape.check(&bigger).unwrap_err().to_string();
    assert!(err.contains("LoRA rank"), "{err}");
}

#[test]
fn a_stack_no_adapter_touches_has_no_launches() {
    let mut r = rng(43);
    let other = adapter(&mut r, "o", &[("o", 2, 8)]);
    assert!(LoraShape::new(&[other], &[("q", 8), ("k", 8)], 8, None).is_none());
}
