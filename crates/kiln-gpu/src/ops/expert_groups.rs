//! The grouped product with a mixture's experts, for steps of many tokens on adapters with
//! subgroups of at least 8 ([`crate::Kernels::moe_grouped`]): the step's tokens listed by the
//! expert each chose in each slot (`shaders/moe_group.wgsl`), then each expert's weights
//! read once for a tile of its tokens (`shaders/moe_matmul_subgroup.wgsl`). Steps of fewer
//! tokens than [`grouped_from`] run the per-token product ([`super::expert_matvec`])
//! instead; the step's token count picks one when it is recorded.

use bytemuck::{Pod, Zeroable};

use super::experts::{ExpertProduct, Routing, product_params};
use crate::kernels::PairEpilogue;
use crate::{GpuContext, GpuError, Grid, Kernels, Launch};

/// The tile: rows (tokens of one expert) x outputs an invocation, invocations a workgroup.
/// On lavapipe 8 x 4 ran the fastest of 4, 8 and 16 rows by 2, 4 and 8 outputs (BENCHMARKS.md).
const ROWS: u32 = 8;
const OUTS: u32 = 4;
const WORKGROUP: u32 = 16;
/// The most experts `moe_group.wgsl` lists.
pub const MAX_GROUPED_EXPERTS: usize = 512;

/// Where a step's tokens are listed by expert: `moe_group.wgsl`'s order and tiles.
pub struct ExpertGroups {
    pub order: wgpu::Buffer,
    pub tiles: wgpu::Buffer,
    pub experts: usize,
    pub slots: usize,
    /// The most tokens a step has.
    pub cap: usize,
}

impl ExpertGroups {
    /// The buffers for steps of up to `cap` tokens, each choosing `slots` of `experts`.
    pub fn new(ctx: &GpuContext, experts: usize, slots: usize, cap: usize) -> Self {
        let stride = Self::stride_of(experts, cap);
        Self {
            order: ctx.storage("expert order", (slots * cap * 4) as u64),
            tiles: ctx.storage("expert tiles", (slots * stride * 16) as u64),
            experts,
            slots,
            cap,
        }
    }

    /// A slot's share of the tiles: its count, then as many tiles as its tokens can need.
    fn stride(&self) -> usize {
        Self::stride_of(self.experts, self.cap)
    }

    fn stride_of(experts: usize, cap: usize) -> usize {
        1 + cap.div_ceil(ROWS as usize) + experts
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GroupParams {
    experts: u32,
    slots: u32,
    cap: u32,
    stride: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Route {
    slots: u32,
    summed: u32,
    row0: u32,
    rows: u32,
    slot: u32,
    cap: u32,
    stride: u32,
    pad: u32,
}

/// The step's tokens from which the grouped product runs: as many as the experts (a token an
/// expert in each slot, on average), and at least 16. On lavapipe, for 32 experts, the
/// per-token product was the faster for 16 tokens and the grouped one from 32 (BENCHMARKS.md).
pub fn grouped_from(experts: usize) -> u32 {
    (experts as u32).max(16)
}

/// Lists each slot's tokens by expert, on steps of at least `from` tokens.
pub fn moe_group(
    ctx: &GpuContext,
    kernels: &Kernels,
    step: &wgpu::Buffer,
    from: u32,
    r: &Routing,
    g: &ExpertGroups,
) -> Result<Launch, GpuError> {
    if g.experts > MAX_GROUPED_EXPERTS {
        return Err(GpuError::Shape {
            op: "moe_group",
            detail: format!(
                "{} experts, more than the {MAX_GROUPED_EXPERTS} listed",
                g.experts
            ),
        });
    }
    let p = super::params(
        ctx,
        "moe_group",
        &GroupParams {
            experts: g.experts as u32,
            slots: g.slots as u32,
            cap: g.cap as u32,
            stride: g.stride() as u32,
        },
    );
    let constants = [("TILE", ROWS as f64)];
    Ok(Launch::new(
        &ctx.device,
        kernels.get_with("moe_group", &constants),
        &[step, &p, r.ids, &g.order, &g.tiles],
        Grid::Within {
            tokens: from..u32::MAX,
            grid: Box::new(Grid::Fixed([g.slots as u32, 1, 1])),
        },
    ))
}

/// The grouped product's launches (a chunk of the stack each; down, a slot each too), on
/// steps of at least `from` tokens.
pub fn expert_matmul(
    ctx: &GpuContext,
    kernels: &Kernels,
    from: u32,
    r: &Routing,
    g: &ExpertGroups,
    a: ExpertProduct,
) -> Result<Vec<Launch>, GpuError> {
    let (n, params) = product_params(ctx, "moe_matmul_subgroup", &a)?;
    let no_bias = ctx.placeholder(16);
    let gain = a.norm.map_or(&no_bias, |n| n.0);
    let summed = a.glu.is_none();
    let constants = [
        ("ROWS", ROWS as f64),
        ("OUTS", OUTS as f64),
        ("WORKGROUP", WORKGROUP as f64),
    ];
    // Down adds into each token's row: one slot a launch, so no two workgroups add into a row.
    let slots: Vec<Option<u32>> = match summed {
        true => (0..g.slots as u32).map(Some).collect(),
        false => vec![None],
    };
    let mut launches = Vec::new();
    for (chunk, p) in a.w.chunks.iter().zip(&params) {
        let kernel = kernels.get_matrix(
            "moe_matmul_subgroup",
            chunk.format,
            PairEpilogue::Glu,
            &constants,
        );
        for slot in &slots {
            let route = super::params(
                ctx,
                "moe group route",
                &Route {
                    slots: g.slots as u32,
                    summed: summed as u32,
                    row0: chunk.row_offset,
                    rows: chunk.rows,
                    slot: slot.unwrap_or(0),
                    cap: g.cap as u32,
                    stride: g.stride() as u32,
                    pad: 0,
                },
            );
            // Bindings 1 to 10: the tiles, not the step, say which rows there are.
            let buffers = [
                p,
                a.x,
                &chunk.buffer,
                a.bias.unwrap_or(&no_bias),
                a.y,
                gain,
                &route,
                &g.order,
                &g.tiles,
                r.weights,
            ];
            let bindings: Vec<_> = (1..)
                .zip(buffers)
                .map(|(i, b)| (i, b.as_entire_buffer_binding()))
                .collect();
            let grid = Grid::Grouped {
                x: n.div_ceil(WORKGROUP * OUTS),
                per: ROWS,
                groups: g.experts as u32,
                z: if summed { 1 } else { g.slots as u32 },
            };
            let grid = Grid::Within {
                tokens: from..u32::MAX,
                grid: Box::new(grid),
            };
            launches.push(Launch::with_extra(
                &ctx.device,
                kernel.clone(),
                &[],
                &bindings,
                grid,
            ));
        }
    }
    Ok(launches)
}
