//! The order of a stacked matrix's rows on the GPU ([`RowOrder`]): as stored, gate and up
//! interleaved, or q and k in the rotary pair layout, and the stored row each one holds.

use crate::ops;

/// How a stacked matrix's rows lie on the GPU, for the epilogue that reads them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowOrder {
    Stacked,
    /// Gate and up rows interleaved where their formats allow
    /// ([`GpuMatrix::paired`](crate::GpuMatrix::paired)).
    GateUp,
    /// The first `rows` rows (q and k) in the rotary pair layout of heads of `head_dim`
    /// ([`ops::paired_row`]), whether or not the rotary step is in the product's epilogue: the
    /// KV cache has one layout.
    Rotary {
        rows: usize,
        head_dim: usize,
        /// The dimensions of a head that turn
        /// ([`ModelConfig::rotary_dim`](kiln_model::ModelConfig::rotary_dim)).
        rotary_dim: usize,
    },
}

impl RowOrder {
    /// The stacked row that row `r` holds.
    pub fn source(self, r: usize) -> usize {
        match self {
            RowOrder::Rotary {
                rows,
                head_dim,
                rotary_dim,
            } if r < rows => ops::paired_row(r, head_dim, rotary_dim),
            _ => r,
        }
    }
}
