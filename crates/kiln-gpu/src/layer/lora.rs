//! A layer's LoRA stacks: which products adapters adapt (every one, where the runner has room
//! for adapters loaded later), their launches after those products, and their slots
//! rewritten when an adapter is loaded or taken out.

use std::sync::Arc;

use kiln_model::{LoraAdapter, LoraPairs, Op, Tensor};

use super::{Layer, LayerContext, RowOrder, Step};
use crate::ops::{self, LoraCapacity};
use crate::{GpuContext, GpuError};

/// The adapters a runner starts with (by slot) and its room for more.
#[derive(Clone, Copy)]
pub(crate) struct LoraSetup<'a> {
    pub adapters: &'a [Arc<LoraAdapter>],
    pub capacity: Option<LoraCapacity>,
}

impl LoraSetup<'_> {
    /// Whether a product of `parts` gets adapters' launches: with room for adapters loaded
    /// later every product does, else those some adapter adapts.
    pub fn adapts(&self, parts: &[Tensor]) -> bool {
        self.capacity.is_some()
            || (self.adapters.iter()).any(|a| parts.iter().any(|t| a.ranks.contains_key(&t.name)))
    }
}

/// The bytes every layer's stacks will take (what [`lora_launch`] makes), for a memory budget
/// made before the layers are.
pub(crate) fn lora_bytes(layers: &[kiln_model::Layer], setup: &LoraSetup) -> u64 {
    let mut bytes = 0;
    for parts in layers.iter().flat_map(|l| &l.ops).map(Op::matrices) {
        let Some(first) = parts.first() else {
            continue;
        };
        let shape = ops::LoraShape::new(
            setup.adapters,
            &named(parts),
            first.shape[1],
            setup.capacity,
        );
        bytes += shape.map_or(0, |s| s.bytes());
    }
    bytes
}

/// A stack's parts as its shape names them: (tensor name, rows).
pub(super) fn named(parts: &[Tensor]) -> Vec<(&str, usize)> {
    parts
        .iter()
        .map(|t| (t.name.as_str(), t.shape[0]))
        .collect()
}

/// The adapters' launches for a product of `parts`, its rows in `order`, from `x`
/// (normalized with the gain, if given) into `y` (rows of `ldy`), with that order.
pub(super) fn lora_launch(
    l: &LayerContext,
    parts: &[Tensor],
    order: RowOrder,
    (x, norm): (&wgpu::Buffer, Option<(&wgpu::Buffer, f32)>),
    (y, ldy): (&wgpu::Buffer, u32),
    bytes: &mut u64,
) -> Result<Option<(ops::Lora, RowOrder)>, GpuError> {
    let cols = parts[0].shape[1];
    let Some(shape) = ops::LoraShape::new(l.lora.adapters, &named(parts), cols, l.lora.capacity)
    else {
        return Ok(None);
    };
    *bytes += shape.bytes();
    let t = l.bufs.lora_t.as_ref().ok_or_else(|| GpuError::Shape {
        op: "lora",
        detail: "adapters without their scratch buffer".into(),
    })?;
    let bufs = ops::LoraBuffers {
        step: &l.inputs.step,
        slots: &l.inputs.lora_slots,
        x,
        norm,
        y,
        ldy,
        t,
    };
    let source = |r| order.source(r);
    let lora = ops::Lora::new(l.ctx, l.kernels, shape, l.lora.adapters, &source, bufs)?;
    Ok(Some((lora, order)))
}

impl Layer {
    /// Whether `adapter` fits this layer's stacks: each matrix it adapts has one, with the
    /// rank for it.
    pub fn check_lora(&self, adapter: &LoraAdapter) -> Result<(), GpuError> {
        let stacks: Vec<&ops::LoraShape> = (self.steps.iter())
            .filter_map(|s| match s {
                Step::Lora(l, _) => Some(l.shape()),
                _ => None,
            })
            .collect();
        for shape in &stacks {
            shape.check(adapter)?;
        }
        Ok(())
    }

    /// Writes an adapter's `pairs` (or nothing) into slot `slot` of every stack.
    pub fn set_lora(&self, ctx: &GpuContext, slot: usize, pairs: Option<&LoraPairs>) {
        for step in &self.steps {
            if let Step::Lora(l, order) = step {
                l.set_slot(ctx, slot, pairs, &|r| order.source(r));
            }
        }
    }
}
