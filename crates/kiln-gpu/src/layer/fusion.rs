//! Which launches fold into the product before them, as its epilogue: the gated activation
//! into a gate/up product, relu(x)^2 into the one product of a MLP without a gate; and whether
//! any layer still needs the gate/up buffer that a folded product does without.

use kiln_model::{Buf, Op, Weights};

use super::LoraSetup;
use crate::ops::OutputMap;
use crate::weight_format::gpu_format;
use crate::{GpuError, WeightStorage};

/// Whether a product into `dst` followed by `next` may carry the gated activation in its
/// epilogue (when its gate and up rows pair up).
pub(super) fn fuses_glu(dst: Buf, bias: bool, next: Option<&Op>) -> bool {
    dst == Buf::GateUp && !bias && matches!(next, Some(Op::GatedActivation))
}

/// Whether some layer will make the step's gate/up buffer: a gate/up product that cannot
/// carry the activation (a bias, no activation after it, or parts whose GPU formats differ or
/// whose rows do not pair up), as [`Layer::new`](super::Layer::new) decides when it uploads
/// them.
pub(crate) fn needs_gate_up(
    layers: &[kiln_model::Layer],
    weights: &Weights,
    storage: WeightStorage,
    lora: &LoraSetup,
) -> Result<bool, GpuError> {
    for layer in layers {
        let mut ops = layer.ops.iter().peekable();
        while let Some(op) = ops.next() {
            let Op::NormedProject {
                weights: parts,
                bias,
                dst: Buf::GateUp,
                ..
            } = op
            else {
                continue;
            };
            if !fuses_glu(Buf::GateUp, bias.is_some(), ops.peek().copied()) || lora.adapts(parts) {
                return Ok(true);
            }
            let formats = (parts.iter())
                .map(|t| gpu_format(weights, &t.name, storage))
                .collect::<Result<Vec<_>, _>>()?;
            let rows: usize = parts.iter().map(|t| t.shape[0]).sum();
            if formats.windows(2).any(|f| f[0] != f[1]) || !rows.is_multiple_of(2) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The epilogue of a product that a MLP without a gate activates (relu(x)^2, the one such
/// activation the epilogue has; GELU's is a launch of its own,
/// [`ops::ungated`](crate::ops::ungated)).
pub(super) fn activation_map(act: kiln_model::Activation) -> Result<OutputMap, GpuError> {
    match act {
        kiln_model::Activation::Relu2 => Ok(OutputMap::Relu2),
        other => Err(GpuError::Shape {
            op: "layer",
            detail: format!("a MLP without a gate activated by {other:?}"),
        }),
    }
}
