//! The tiles of `shaders/matmul_rowwise_subgroup.wgsl` (the row-wise family's matrix kernel
//! on adapters with subgroups of at least 8), which `matmul.rs` picks by a step's rows, and the
//! uniform binding of x's head that the short ones read.

use crate::Grid;

/// A tile of `matmul_rowwise_subgroup.wgsl` (its override constants): `rows` rows times `outs`
/// outputs an invocation, `workgroup` invocations a workgroup; `uniform_x`: a step whose rows lie
/// in x's first [`X_HEAD_BYTES`] reads them through the uniform binding.
#[derive(Clone, Copy)]
pub(super) struct SubgroupTile {
    pub rows: u32,
    pub outs: u32,
    pub workgroup: u32,
    pub uniform_x: bool,
}

/// The tiles a step runs, by its row count: a step of `r` rows runs the first tile of at least
/// `r` rows, or the last. Rows past a step's last are computed (repeating it) and not stored,
/// so a tile much taller than the step wastes its work. Two outputs an invocation throughout:
/// larger tiles load less per multiply-add but spill their accumulators (BENCHMARKS.md has the
/// shapes tried). Workgroups of 16 for the short tiles, so that even a 576-row product is 18
/// workgroups to share among the cores. Through the uniform binding 8 sequences decoded 1.4x
/// faster on lavapipe, and 16 sequences in the 16-row tile slower than through the storage one.
pub(super) const SUBGROUP_TILES: [SubgroupTile; 4] = [
    SubgroupTile {
        rows: 1,
        outs: 2,
        workgroup: 16,
        uniform_x: true,
    },
    SubgroupTile {
        rows: 4,
        outs: 2,
        workgroup: 16,
        uniform_x: true,
    },
    SubgroupTile {
        rows: 8,
        outs: 2,
        workgroup: 16,
        uniform_x: true,
    },
    SubgroupTile {
        rows: 16,
        outs: 2,
        workgroup: 32,
        uniform_x: false,
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

/// Bytes at the head of x that `matmul_rowwise_subgroup.wgsl` can read through a uniform
/// binding (its `x_head`), which lavapipe loads far more cheaply than a storage buffer: a tile
/// whose rows lie within them reads x there. Adapters whose uniform bindings are smaller do
/// not run the kernel.
pub const X_HEAD_BYTES: u64 = 65536;

/// Binding number of the kernel's `x_head`.
pub(super) const X_HEAD_BINDING: u32 = 12;

impl SubgroupTile {
    pub fn constants(self, uniform_x: bool) -> [(&'static str, f64); 4] {
        [
            ("ROWS", self.rows as f64),
            ("OUTS", self.outs as f64),
            ("WORKGROUP", self.workgroup as f64),
            ("UNIFORM_X", f64::from(u8::from(uniform_x))),
        ]
    }

    pub fn grid(self, n: u32, samples: bool) -> Grid {
        Grid::Tiles {
            x: n.div_ceil(self.workgroup * self.outs),
            per: self.rows,
            samples,
        }
    }
}
