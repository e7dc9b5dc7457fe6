//! LoRA adapters at run time: after a projection's product, the tokens that run through an
//! adapter get `scale * B (A x)` added to their outputs (`lora_shrink.wgsl`, then
//! `lora_expand.wgsl`), so requests through different adapters, and through none, share one
//! step and one copy of the base weights.
//!
//! A projection's stack of matrices (q, k and v; gate and up) takes one pair of launches: an
//! adapter's A matrices of its parts are stacked by rows (each part its own range of the rank),
//! and B is block-diagonal over them, each output row reading its part's range. Every adapter
//! slot gets the same rank (padded); a slot whose adapter leaves the stack alone, or that
//! holds none, is passed over by its bit in `present`. A slot is rewritten in place when an
//! adapter is loaded into it or taken out ([`Lora::set_slot`]), where the runner was built
//! with room for that ([`LoraCapacity`]).

use std::cell::Cell;
use std::sync::Arc;

use bytemuck::{Pod, Zeroable};
use kiln_model::{LoraAdapter, LoraPairs};

use crate::{GpuContext, GpuError, Grid, Kernels, Launch, Recorded};

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

/// Room for adapters loaded while the runner runs: every projection gets a stack of `slots`
/// adapters, each of rank up to `rank` per matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoraCapacity {
    pub slots: usize,
    pub rank: usize,
}

/// One stack's shape: its parts (tensor name, rows), their width, and the rank and number of
/// its slots. Both matrices are stored in f16 (adapters are saved in 16 bits, or their f32
/// values rounded) and transposed, so that neighbouring invocations (ranks in the first
/// product, output rows in the second) read neighbouring values, four at a time: A as
/// (slots, cols, rank), B as (slots, rank, rows rounded up to 4).
pub struct LoraShape {
    parts: Vec<(String, usize)>,
    cols: usize,
    rows: usize,
    rank: usize,
    slots: usize,
}

impl LoraShape {
    /// The stack of `parts` of `cols` columns for `adapters` (by slot), or with `capacity`'s
    /// room; `None` when neither gives it a rank.
    pub fn new(
        adapters: &[Arc<LoraAdapter>],
        parts: &[(&str, usize)],
        cols: usize,
        capacity: Option<LoraCapacity>,
    ) -> Option<Self> {
        let needed = adapters
            .iter()
            .map(|a| rank_in(a, parts))
            .max()
            .unwrap_or(0);
        let (slots, rank) = match capacity {
            Some(c) => (c.slots, (parts.len() * c.rank).max(needed)),
            None => (adapters.len(), needed),
        };
        (rank > 0).then(|| Self {
            parts: parts.iter().map(|&(n, r)| (n.to_string(), r)).collect(),
            cols,
            rows: parts.iter().map(|p| p.1).sum(),
            rank: rank.next_multiple_of(4),
            slots,
        })
    }

    fn ldb(&self) -> usize {
        self.rows.next_multiple_of(4)
    }

    /// The bytes its matrices take on the GPU.
    pub fn bytes(&self) -> u64 {
        (self.slots * self.rank * (self.cols + self.ldb()) * 2) as u64
    }

    /// Whether `adapter`'s matrices of this stack fit a slot.
    pub fn check(&self, adapter: &LoraAdapter) -> Result<(), GpuError> {
        let rank = rank_in(adapter, &self.named());
        if rank > self.rank {
            return Err(GpuError::Capacity {
                what: "LoRA rank of a projection (its matrices' ranks together)",
                needed: rank,
                max: self.rank,
            });
        }
        Ok(())
    }

    fn named(&self) -> Vec<(&str, usize)> {
        self.parts.iter().map(|(n, r)| (n.as_str(), *r)).collect()
    }

    /// One slot's A and B for an adapter's `pairs` (zeros where it adapts no part; `None`
    /// when it adapts none), output row `r` holding stacked row `source(r)`.
    fn slot_values(
        &self,
        pairs: &LoraPairs,
        source: &dyn Fn(usize) -> usize,
    ) -> Option<(Vec<f32>, Vec<f32>)> {
        let (rank, cols, ldb) = (self.rank, self.cols, self.ldb());
        let mut a = vec![0f32; cols * rank];
        let mut b = vec![0f32; rank * ldb];
        // Each part's first stacked row, and where its range of the rank starts.
        let (mut starts, mut ranges) = (Vec::new(), Vec::new());
        let (mut start, mut offset) = (0, 0);
        for (name, rows) in &self.parts {
            starts.push(start);
            ranges.push(offset);
            start += rows;
            let Some(pair) = pairs.get(name) else {
                continue;
            };
            for q in 0..pair.rank {
                for c in 0..cols {
                    a[c * rank + offset + q] = pair.a[q * cols + c];
                }
            }
            offset += pair.rank;
        }
        if offset == 0 {
            return None;
        }
        for r in 0..self.rows {
            let src = source(r);
            let p = starts.partition_point(|&st| st <= src) - 1;
            let Some(pair) = pairs.get(&self.parts[p].0) else {
                continue;
            };
            let local = src - starts[p];
            for q in 0..pair.rank {
                b[(ranges[p] + q) * ldb + r] = pair.b[local * pair.rank + q];
            }
        }
        Some((a, b))
    }
}

/// The rank `adapter` gives a stack of `parts`: its matrices' ranks together.
fn rank_in(adapter: &LoraAdapter, parts: &[(&str, usize)]) -> usize {
    (parts.iter())
        .filter_map(|(n, _)| adapter.ranks.get(*n))
        .sum()
}

/// `v` in f16, little-endian, as the kernels unpack it.
fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect()
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

/// One stack's two launches and the matrices of its slots.
pub struct Lora {
    shape: LoraShape,
    a: wgpu::Buffer,
    b: wgpu::Buffer,
    shrink_params: wgpu::Buffer,
    expand_params: wgpu::Buffer,
    /// Bit `s`: slot `s`'s adapter adapts some part of the stack.
    present: Cell<u32>,
    shrink: Launch,
    expand: Launch,
}

impl Lora {
    /// The launches of stack `shape`, its slots holding `adapters` (output row `r` holding
    /// stacked row `source(r)`), the rest empty.
    pub fn new(
        ctx: &GpuContext,
        kernels: &Kernels,
        shape: LoraShape,
        adapters: &[Arc<LoraAdapter>],
        source: &dyn Fn(usize) -> usize,
        bufs: LoraBuffers,
    ) -> Result<Self, GpuError> {
        let (rank, cols, ldb) = (shape.rank, shape.cols, shape.ldb());
        let mut a = vec![0f32; shape.slots * cols * rank];
        let mut b = vec![0f32; shape.slots * rank * ldb];
        let mut present = 0u32;
        for (s, adapter) in adapters.iter().enumerate() {
            shape.check(adapter)?;
            if let Some((sa, sb)) = shape.slot_values(&*adapter.pairs()?, source) {
                a[s * cols * rank..(s + 1) * cols * rank].copy_from_slice(&sa);
                b[s * rank * ldb..(s + 1) * rank * ldb].copy_from_slice(&sb);
                present |= 1 << s;
            }
        }
        let am = ctx.storage_init("lora A", &f16_bytes(&a));
        let bm = ctx.storage_init("lora B", &f16_bytes(&b));
        let (gain, eps) = bufs.norm.unwrap_or((bufs.x, 0.0));
        let shrink_params = super::params(
            ctx,
            "lora_shrink",
            &ShrinkParams {
                k: cols as u32,
                rank: rank as u32,
                flags: bufs.norm.is_some() as u32,
                eps,
                present,
                pad: [0; 3],
            },
        );
        let expand_params = super::params(
            ctx,
            "lora_expand",
            &ExpandParams {
                n: shape.rows as u32,
                rank: rank as u32,
                ldy: bufs.ldy,
                present,
            },
        );
        let tiles = |x| Grid::Tiles {
            x,
            per: TILE,
            samples: false,
        };
        let shrink = Launch::new(
            &ctx.device,
            kernels.get("lora_shrink"),
            &[
                bufs.step,
                &shrink_params,
                bufs.slots,
                bufs.x,
                gain,
                &am,
                bufs.t,
            ],
            tiles(1),
        );
        let expand = Launch::new(
            &ctx.device,
            kernels.get("lora_expand"),
            &[bufs.step, &expand_params, bufs.slots, bufs.t, &bm, bufs.y],
            tiles(shape.rows.div_ceil(4).div_ceil(256) as u32),
        );
        Ok(Self {
            shape,
            a: am,
            b: bm,
            shrink_params,
            expand_params,
            present: Cell::new(present),
            shrink,
            expand,
        })
    }

    pub fn shape(&self) -> &LoraShape {
        &self.shape
    }

    /// Rewrites slot `slot` with an adapter's `pairs`, or empties it (queued like a step's
    /// upload, so a step submitted before is not touched). [`LoraShape::check`] first.
    pub fn set_slot(
        &self,
        ctx: &GpuContext,
        slot: usize,
        pairs: Option<&LoraPairs>,
        source: &dyn Fn(usize) -> usize,
    ) {
        let s = &self.shape;
        let (rank, cols, ldb) = (s.rank, s.cols, s.ldb());
        let values = pairs.and_then(|p| s.slot_values(p, source));
        let bit = 1u32 << slot;
        let present = match &values {
            Some(_) => self.present.get() | bit,
            None => self.present.get() & !bit,
        };
        if let Some((a, b)) = values {
            ctx.write(&self.a, (slot * cols * rank * 2) as u64, &f16_bytes(&a));
            ctx.write(&self.b, (slot * rank * ldb * 2) as u64, &f16_bytes(&b));
        }
        self.present.set(present);
        let field = |o: usize| o as u64;
        let shrink_at = field(std::mem::offset_of!(ShrinkParams, present));
        let expand_at = field(std::mem::offset_of!(ExpandParams, present));
        ctx.write(&self.shrink_params, shrink_at, bytemuck::bytes_of(&present));
        ctx.write(&self.expand_params, expand_at, bytemuck::bytes_of(&present));
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
