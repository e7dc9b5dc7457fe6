//! The tiles of `shaders/matmul_rowwise_subgroup.wgsl` (the row-wise family's matrix kernel
//! on adapters with subgroups of at least 8), which `matmul.rs` picks by a step's rows, and the
//! two uniform bindings of x they read where those hold the step's rows.

use crate::Grid;

/// A tile of `matmul_rowwise_subgroup.wgsl` (its override constants): `rows` rows times `outs`
/// outputs an invocation, `workgroup` invocations a workgroup.
#[derive(Clone, Copy)]
pub(super) struct SubgroupTile {
    pub rows: u32,
    pub outs: u32,
    pub workgroup: u32,
}

/// The tiles a step runs, by its row count: a step of `r` rows runs the first tile of at least
/// `r` rows, or the last. Rows past a step's last are computed (repeating it) and not stored,
/// so a tile much taller than the step wastes its work. Two outputs an invocation for the short
/// tiles and four for the tall ones, whose x loads then serve twice the weights; more spill
/// their accumulators (BENCHMARKS.md has the shapes tried). Workgroups of 16 throughout, so that
/// even a 576-row product is 9 or more workgroups to share among the cores. Through the uniform
/// bindings, with the row loop split in two so that lavapipe unrolls it, 16 sequences decode
/// 1.7x faster on lavapipe than through storage loads alone.
pub(super) const SUBGROUP_TILES: [SubgroupTile; 4] = [
    SubgroupTile {
        rows: 1,
        outs: 2,
        workgroup: 16,
    },
    SubgroupTile {
        rows: 4,
        outs: 2,
        workgroup: 16,
    },
    SubgroupTile {
        rows: 8,
        outs: 4,
        workgroup: 16,
    },
    SubgroupTile {
        rows: 16,
        outs: 4,
        workgroup: 16,
    },
];

// The kernel's accumulator arrays hold at most 16 rows x 8 outputs, and pairs stay whole.
const _: () = {
    let mut i = 0;
    while i < SUBGROUP_TILES.len() {
        let t = SUBGROUP_TILES[i];
        assert!(t.rows <= 16 && t.outs <= 8 && t.outs.is_multiple_of(2));
        i += 1;
    }
};

/// Bytes of x that each of `matmul_rowwise_subgroup.wgsl`'s uniform bindings of it (`x_head`
/// from row 0, `x_head_hi` from row [`X_HEAD_HI_ROW`]) holds; lavapipe loads through them far
/// more cheaply than through the storage binding: a tile whose rows lie within them reads x
/// there. Adapters whose uniform bindings are smaller do not run the kernel.
pub const X_HEAD_BYTES: u64 = 65536;

/// The row of x from which the kernel's second uniform binding, `x_head_hi`, holds it.
pub(super) const X_HEAD_HI_ROW: u64 = 8;

/// Binding numbers of the kernel's `x_head` and `x_head_hi`.
pub(super) const X_HEAD_BINDINGS: [u32; 2] = [12, 13];

/// Where in an x of `k` columns the kernel's two uniform bindings start, in bytes.
pub(super) fn x_head_offsets(k: u64) -> [u64; 2] {
    [0, X_HEAD_HI_ROW * k * 4]
}

impl SubgroupTile {
    pub fn constants(self, uniform_x: bool) -> [(&'static str, f64); 4] {
        [
            ("ROWS", self.rows as f64),
            ("OUTS", self.outs as f64),
            ("WORKGROUP", self.workgroup as f64),
            ("UNIFORM_X", f64::from(u8::from(uniform_x))),
        ]
    }

    /// Whether a step of up to this tile's rows may read an x of `k` columns through the
    /// uniform bindings, `bound` telling which of them hold x (the others a stand-in).
    pub fn reads_x_head(self, k: u64, bound: [bool; 2]) -> bool {
        let rows = u64::from(self.rows);
        let lo_rows = rows.min(X_HEAD_HI_ROW);
        let hi_rows = rows - lo_rows;
        let fits = |rows: u64| rows * k * 4 <= X_HEAD_BYTES;
        bound[0] && fits(lo_rows) && (hi_rows == 0 || (bound[1] && fits(hi_rows)))
    }

    pub fn grid(self, n: u32, samples: bool) -> Grid {
        Grid::Tiles {
            x: n.div_ceil(self.workgroup * self.outs),
            per: self.rows,
            samples,
        }
    }
}
