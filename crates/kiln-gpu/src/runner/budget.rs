//! The KV blocks a device-memory budget leaves: what the runner has made so far, the weights
//! still to come and the buffers its layers will make, taken from the budget.

use std::sync::atomic::Ordering;

use kiln_model::Weights;

use super::RunnerConfig;
use crate::layer::{Activations, LoraSetup, lora_bytes, needs_gate_up};
use crate::ops::X_HEAD_BYTES;
use crate::{GpuContext, GpuError, KvLayout, gpu_weight_bytes};

/// What the runner has spent and will spend besides the KV cache.
pub(super) struct Spent<'a> {
    /// Bytes the context had allocated when the runner began.
    pub allocated_before: u64,
    /// Bytes of weights made so far.
    pub weights_made: u64,
    pub bufs: &'a Activations,
    pub layers: &'a [kiln_model::Layer],
    pub lora: &'a LoraSetup<'a>,
}

/// Blocks of `layout` that `budget` bytes leave after `spent` (at most `rc.num_blocks`); an
/// error when they leave none.
pub(super) fn kv_blocks(
    ctx: &GpuContext,
    spent: Spent,
    weights: &Weights,
    rc: &RunnerConfig,
    layout: KvLayout,
    budget: u64,
) -> Result<usize, GpuError> {
    // The layers' kernels bind these (made once per device).
    for bytes in [16, X_HEAD_BYTES] {
        ctx.placeholder(bytes);
    }
    let made = ctx.allocated.load(Ordering::Relaxed) - spent.allocated_before;
    let (all_weights, _) = gpu_weight_bytes(weights, rc.weights)?;
    // The gate/up buffer, where a layer will make it.
    let gate_up = match spent.bufs.gate_up.get() {
        None if needs_gate_up(spent.layers, weights, rc.weights, spent.lora)? => {
            spent.bufs.gate_up_bytes
        }
        _ => 0,
    };
    let adapters = lora_bytes(spent.layers, spent.lora);
    let rest = made + all_weights.saturating_sub(spent.weights_made) + gate_up + adapters;
    let num_blocks = layout
        .blocks_in(budget.saturating_sub(rest))
        .min(rc.num_blocks);
    if num_blocks == 0 {
        return Err(GpuError::Memory(format!(
            "a budget of {budget} bytes leaves no KV block of {} bytes: the weights take {all_weights} and the step's buffers {}",
            layout.bytes_per_block(),
            made - spent.weights_made
        )));
    }
    Ok(num_blocks)
}
