//! LoRA adapters at run time: after a projection's product, the tokens that run through an
//! adapter get `scale * B (A x)` added to their outputs (`lora_shrink.wgsl`, then
//! `lora_expand.wgsl`), so requests through different adapters, and through none, share one
//! step and one copy of the base weights.
//!
//! A projection's stack of matrices (q, k and v; gate and up) takes one pair of launches: the
//! adapters' A matrices of its parts are stacked by rows (each part its own range of the rank),
//! and B is block-diagonal over them, each output row reading its part's range. Every adapter
//! slot gets the same padded rank; a slot whose adapter leaves the stack alone is passed over
//! by its bit in `present`.

use std::sync::Arc;

use bytemuck::{Pod, Zeroable};
use kiln_model::LoraAdapter;

use crate::{GpuContext, Grid, Kernels, Launch, Recorded};

/// Twin of `lora_shrink.wgsl`'s `Params`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ShrinkParams {
    k: u32,
    rank: u32,
    flags: u32,
    eps: f32,
    present: u32,
    pad: [u32; 3],
}

/// Twin of `lora_expand.wgsl`'s `Params`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ExpandParams {
    n: u32,
    rank: u32,
    ldy: u32,
    present: u32,
}

/// Rows of a tile, each value of A and B read once for the tile's rows through one adapter
/// (`TILE` in both kernels).
const TILE: u32 = 8;

/// Most adapters one runner holds (a bit each in `present`).
pub const MAX_LORA_SLOTS: usize = 32;

/// Every adapter's A and B for one stack of matrices, laid out for the kernels: both
/// transposed, so that neighbouring invocations (ranks in the first product, output rows in
/// the second) read neighbouring values, four at a time (the rank and the rows padded with
/// zeros to multiples of 4).
pub struct LoraStack {
    /// A transposed: (slots, cols, rank).
    a: Vec<f32>,
    /// B transposed: (slots, rank, rows rounded up to a multiple of 4).
    b: Vec<f32>,
    rank: usize,
    rows: usize,
    cols: usize,
    /// Bit `s`: adapter `s` adapts some part of the stack.
    present: u32,
}

impl LoraStack {
    /// The stack of `parts` (tensor name, rows) of `cols` columns, output row `r` holding
    /// stacked row `source(r)`; `None` when no adapter adapts any part.
    pub fn new(
        adapters: &[Arc<LoraAdapter>],
        parts: &[(&str, usize)],
        cols: usize,
        source: impl Fn(usize) -> usize,
    ) -> Option<Self> {
        let rank_of = |ad: &LoraAdapter, name: &str| ad.pairs.get(name).map_or(0, |p| p.rank);
        let rank = (adapters.iter())
            .map(|ad| parts.iter().map(|(n, _)| rank_of(ad, n)).sum::<usize>())
            .max()?;
        if rank == 0 {
            return None;
        }
        let rank = rank.next_multiple_of(4);
        let rows: usize = parts.iter().map(|p| p.1).sum();
        let ldb = rows.next_multiple_of(4);
        let (slots, mut present) = (adapters.len(), 0u32);
        let mut a = vec![0f32; slots * rank * cols];
        let mut b = vec![0f32; slots * ldb * rank];
        // Each part's first stacked row.
        let starts: Vec<usize> = (parts.iter())
            .scan(0, |s, p| {
                let start = *s;
                *s += p.1;
                Some(start)
            })
            .collect();
        for (s, ad) in adapters.iter().enumerate() {
            let mut offset = 0;
            // Where each part's rank range starts for this adapter.
            let mut ranges = Vec::new();
            for (name, _) in parts {
                ranges.push(offset);
                let Some(pair) = ad.pairs.get(*name) else {
                    continue;
                };
                present |= 1 << s;
                for q in 0..pair.rank {
                    for c in 0..cols {
                        a[(s * cols + c) * rank + offset + q] = pair.a[q * cols + c];
                    }
                }
                offset += pair.rank;
            }
            for r in 0..rows {
                let src = source(r);
                let p = starts.partition_point(|&st| st <= src) - 1;
                let Some(pair) = ad.pairs.get(parts[p].0) else {
                    continue;
                };
                let local = src - starts[p];
                for q in 0..pair.rank {
                    b[(s * rank + ranges[p] + q) * ldb + r] = pair.b[local * pair.rank + q];
                }
            }
        }
        Some(Self {
            a,
            b,
            rank,
            rows,
            cols,
            present,
        })
    }

    /// The bytes its matrices take on the GPU.
    pub fn bytes(&self) -> u64 {
        ((self.a.len() + self.b.len()) * 4) as u64
    }
}

/// What a stack's launches read and write.
pub struct LoraBuffers<'a> {
    pub step: &'a wgpu::Buffer,
    /// Each token's adapter slot (`u32::MAX`: none).
    pub slots: &'a wgpu::Buffer,
    /// The product's input, with its norm gain and epsilon when the product normalizes it.
    pub x: &'a wgpu::Buffer,
    pub norm: Option<(&'a wgpu::Buffer, f32)>,
    /// The product's output, rows of `ldy`, which the adapters' products are added into.
    pub y: &'a wgpu::Buffer,
    pub ldy: u32,
    /// Scratch for A x: the step's tokens times the widest stack's rank.
    pub t: &'a wgpu::Buffer,
}

/// One stack's two launches.
pub struct Lora {
    shrink: Launch,
    expand: Launch,
}

impl Lora {
    pub fn new(ctx: &GpuContext, kernels: &Kernels, stack: &LoraStack, b: LoraBuffers) -> Self {
        let a = ctx.storage_init("lora A", bytemuck::cast_slice(&stack.a));
        let bm = ctx.storage_init("lora B", bytemuck::cast_slice(&stack.b));
        let (gain, eps) = b.norm.unwrap_or((b.x, 0.0));
        let shrink_params = super::params(
            ctx,
            "lora_shrink",
            &ShrinkParams {
                k: stack.cols as u32,
                rank: stack.rank as u32,
                flags: b.norm.is_some() as u32,
                eps,
                present: stack.present,
                pad: [0; 3],
            },
        );
        let expand_params = super::params(
            ctx,
            "lora_expand",
            &ExpandParams {
                n: stack.rows as u32,
                rank: stack.rank as u32,
                ldy: b.ldy,
                present: stack.present,
            },
        );
        let shrink = Launch::new(
            &ctx.device,
            kernels.get("lora_shrink"),
            &[b.step, &shrink_params, b.slots, b.x, gain, &a, b.t],
            Grid::Tiles {
                x: 1,
                per: TILE,
                samples: false,
            },
        );
        let expand = Launch::new(
            &ctx.device,
            kernels.get("lora_expand"),
            &[b.step, &expand_params, b.slots, b.t, &bm, b.y],
            Grid::Tiles {
                x: stack.rows.div_ceil(4).div_ceil(256) as u32,
                per: TILE,
                samples: false,
            },
        );
        Self { shrink, expand }
    }
}

impl Recorded for Lora {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) -> u32 {
        self.shrink.record(pass, tokens, samples) + self.expand.record(pass, tokens, samples)
    }

    fn label(&self) -> String {
        "lora".into()
    }
}
