//! A stack of tensors uploaded as one matrix.

use kiln_model::Weights;

use crate::layer::RowOrder;
use crate::{GpuContext, GpuError, GpuMatrix, HostMatrix};

/// The tensors `parts` (name, rows) of `cols` columns as one matrix, its rows in `order`:
/// gate and up rows interleaved where their formats allow (else stacked,
/// `GpuMatrix::paired` unset), or q and k in the rotary pair layout (each part's rows
/// reordered within its heads). Quantized parts stay quantized with `keep_quantized`.
pub(super) fn stack(
    ctx: &GpuContext,
    weights: &Weights,
    keep_quantized: bool,
    label: &str,
    parts: &[(&str, usize)],
    cols: usize,
    order: RowOrder,
) -> Result<GpuMatrix, GpuError> {
    let mut start = 0usize;
    let parts = parts
        .iter()
        .map(|&(n, rows)| {
            let mut m = HostMatrix::load(weights, n, rows, cols)?;
            if let RowOrder::Rotary { head_dim, .. } = order {
                if !start.is_multiple_of(head_dim) || !rows.is_multiple_of(head_dim) {
                    return Err(GpuError::Shape {
                        op: "load",
                        detail: format!("{n}: {rows} rows are not whole heads of {head_dim}"),
                    });
                }
                m = m.reorder_rows(|r| order.source(start + r) - start);
            }
            start += rows;
            Ok(if keep_quantized { m } else { m.widened() })
        })
        .collect::<Result<Vec<_>, GpuError>>()?;
    if order == RowOrder::GateUp
        && let Some(m) = GpuMatrix::upload_paired(ctx, label, &parts)?
    {
        return Ok(m);
    }
    GpuMatrix::upload_stacked(ctx, label, &parts)
}
