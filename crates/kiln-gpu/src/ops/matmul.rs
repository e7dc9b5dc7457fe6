//! `y (+)= s * x (g W)^T + b`: the tiled kernel for many rows, the matrix-vector kernel for few
//! (on CPU adapters with subgroups, one kernel with a tile per row count), each compiled for the
//! weight matrix's format, with the epilogue all share
//! (`shaders/matmul_epilogue.wgsl`: bias, residual, and output pairs made a gated activation or
//! rotated into the KV cache).

use std::sync::Arc;

use bytemuck::{Pod, Zeroable};

use kiln_model::Activation;

use super::Rotary;
pub use super::matmul_tiles::X_HEAD_BYTES;
use super::matmul_tiles::{SUBGROUP_TILES, X_HEAD_BINDINGS, x_head_offsets};
use crate::kernels::{Kernel, PairEpilogue};
use crate::{
    GpuContext, GpuError, GpuMatrix, Grid, Kernels, KvDtype, Launch, Recorded, WeightFormat,
};

/// Rows up to which `matvec.wgsl` is used (the subgroup kernel's bound is
/// [`Kernels::matvec_rows`]).
pub const MATVEC_MAX_ROWS: u32 = 8;

/// The parameters every matrix kernel reads (`shaders/matmul_epilogue.wgsl`'s `Params`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct Params {
    pub k: u32,
    pub n: u32,
    pub out_offset: u32,
    pub ldy: u32,
    pub flags: u32,
    pub eps: f32,
    /// Where the weight chunk's block scales start, in u32s.
    pub so: u32,
    /// The soft cap ([`SOFTCAP`]) or the scale ([`SCALE`]).
    pub factor: f32,
}

pub(super) const NORM: u32 = 1;
const BIAS: u32 = 2;
pub(super) const ACCUMULATE: u32 = 4;
const SAMPLE_ROWS: u32 = 8;
pub(super) const PAIRS: u32 = 16;
pub(super) const GELU: u32 = 32;
const SOFTCAP: u32 = 64;
pub(super) const SCALE: u32 = 128;
const RELU2: u32 = 256;
/// With [`PAIRS`]: gpt-oss's clamped SwiGLU in place of SiLU.
pub(super) const CLAMPED_SWIGLU: u32 = 512;
/// In the experts' kernels: each expert's bias (`bias[e * n + o]`) added to its outputs.
pub(super) const EXPERT_BIAS: u32 = 1024;
/// With [`PAIRS`]: exact GELU in place of SiLU.
const GELU_ERF: u32 = 2048;

/// The flags of a gated activation `act` in a product's epilogue.
pub(super) fn glu_flags(act: Activation) -> u32 {
    match act {
        Activation::GeluTanh => PAIRS | GELU,
        Activation::Gelu => PAIRS | GELU_ERF,
        Activation::ClampedSwiglu => PAIRS | CLAMPED_SWIGLU,
        Activation::Silu | Activation::Relu2 => PAIRS,
    }
}

/// Outputs and rows per workgroup of `matmul_rowwise.wgsl` (64 invocations of 8 outputs,
/// `BLOCK` rows), as its grid needs them.
const ROWWISE_TILE: (u32, u32) = (64 * 8, 32);

/// Workgroup memory `matmul_coop.wgsl` takes with cooperative matrices of `side`: the staged
/// f16 tiles of x and w (4 `side` rows of 40), the f32 accumulators (4 `side` squared) and
/// the rows' scales.
pub fn coop_workgroup_bytes(side: u32) -> u32 {
    let t = 4 * side;
    2 * t * 40 * 2 + t * t * 4 + t * 4
}

/// Outputs per workgroup of `matvec_rowwise.wgsl` (16 invocations of 4 outputs).
const ROWWISE_MATVEC_OUTPUTS: u32 = 16 * 4;

/// Storage buffers a rotary epilogue's pipeline binds (five more than a plain product's): a
/// device that allows fewer runs the rotary step as its own launch.
pub const ROTARY_STORAGE_BINDINGS: u32 = 10;

/// What becomes of a product's output pairs, `w`'s rows having been arranged for it at load.
pub enum Pairs<'a> {
    /// `act(gate) * up`: `w`'s rows interleave gate and up ([`GpuMatrix::paired`]), and `y`
    /// (`ldy` = half of `w.rows`) gets one column per pair from `out_offset`.
    Glu(Activation),
    /// The QKV product: `w` is q, k and v stacked, q and k in the rotary pair layout
    /// ([`super::paired_row`]). q is rotated into `y` (columns from 0), k rotated and v go to
    /// the cache: `rope_kv`'s work, for layers without a q/k norm.
    Rotary(Rotary<'a>),
}

pub struct MatmulArgs<'a> {
    /// Input, `(rows, w.cols)`.
    pub x: &'a wgpu::Buffer,
    pub w: &'a GpuMatrix,
    /// Bias of `w.rows` values.
    pub bias: Option<&'a wgpu::Buffer>,
    /// Output, `(rows, ldy)`; this product fills columns `out_offset..out_offset + w.rows`.
    pub y: &'a wgpu::Buffer,
    pub ldy: u32,
    pub out_offset: u32,
    /// RMSNorm of each row first: its gain (`w.cols` values) and epsilon. The kernels scale the
    /// product by 1 / rms(row) and multiply the weights by the gain as they load them.
    pub norm: Option<(&'a wgpu::Buffer, f32)>,
    /// Add into `y` instead of overwriting it (residual connection).
    pub accumulate: bool,
    /// The rows are the step's sampled rows rather than its tokens.
    pub sample_rows: bool,
    /// Outputs taken two by two (a gated activation, or rotation and the KV cache).
    pub pairs: Option<Pairs<'a>>,
    /// What becomes of each output after the bias, before a residual adds it. Not with pairs.
    pub map: OutputMap,
}

/// What becomes of each output of a product after its bias.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OutputMap {
    Identity,
    /// `output * s`: Granite's sub-layer outputs into the residual stream, and its logits.
    Scale(f32),
    /// `cap * tanh(output / cap)`: Gemma 2's logits.
    SoftCap(f32),
    /// `relu(output)^2`: the activation of a MLP without a gate (Arcee's), on its product.
    Relu2,
}

pub struct Matmul {
    /// The launches (one per chunk of the matrix) by the most rows they take, ascending; the
    /// last take any number.
    launches: Vec<(u32, Vec<Launch>)>,
    sample_rows: bool,
    /// Its name in the kernel profile: shape, formats and epilogue.
    label: String,
}

impl Matmul {
    /// The product's launches. A gated activation needs a paired matrix with no bias and no
    /// residual; the rotary epilogue the QKV matrix whole, no residual, and a device that binds
    /// [`ROTARY_STORAGE_BINDINGS`] storage buffers.
    pub fn new(
        ctx: &GpuContext,
        kernels: &Kernels,
        step: &wgpu::Buffer,
        a: MatmulArgs<'_>,
    ) -> Result<Self, GpuError> {
        let refuse = |detail: String| {
            Err(GpuError::Shape {
                op: "matmul",
                detail,
            })
        };
        let mut constants = Vec::new();
        if a.map != OutputMap::Identity && a.pairs.is_some() {
            return refuse("a scale or soft cap takes plain outputs, not pairs".into());
        }
        match &a.pairs {
            Some(Pairs::Glu(_)) if !a.w.paired || a.bias.is_some() || a.accumulate => {
                return refuse(
                    "a gated activation needs interleaved gate/up rows, no bias, no residual"
                        .into(),
                );
            }
            Some(Pairs::Rotary(r)) => {
                r.check();
                let (nh, nkv, d) = r.heads;
                let allowed = ctx.limits.max_storage_buffers_per_shader_stage;
                if a.w.rows != (nh + 2 * nkv) * d
                    || a.accumulate
                    || a.sample_rows
                    || a.out_offset != 0
                    || (a.w.chunks.iter()).any(|c| c.row_offset % 2 != 0 || c.rows % 2 != 0)
                {
                    return refuse(format!(
                        "the rotary epilogue needs the whole QKV matrix ({} rows, in chunks of \
                         whole pairs) written from column 0 of the tokens' rows",
                        (nh + 2 * nkv) * d
                    ));
                }
                if r.kv_dtype == KvDtype::Q8 {
                    return refuse(
                        "a q8_0 KV cache's scales need whole groups of a head: the separate \
                         rotary launch writes it"
                            .into(),
                    );
                }
                if allowed < ROTARY_STORAGE_BINDINGS {
                    return refuse(format!(
                        "the rotary epilogue binds {ROTARY_STORAGE_BINDINGS} storage buffers, \
                         the device {allowed}"
                    ));
                }
                constants = vec![
                    ("HEAD_DIM", d as f64),
                    ("Q_WIDTH", (nh * d) as f64),
                    ("KV_WIDTH", (nkv * d) as f64),
                    ("MAX_POSITIONS", r.max_positions as f64),
                    r.kv_dtype.override_constant(),
                ];
            }
            _ => {}
        }
        let flags = a.norm.map_or(0, |_| NORM)
            | a.bias.map_or(0, |_| BIAS)
            | if a.accumulate { ACCUMULATE } else { 0 }
            | if a.sample_rows { SAMPLE_ROWS } else { 0 }
            | match a.map {
                OutputMap::Identity => 0,
                OutputMap::Scale(_) => SCALE,
                OutputMap::SoftCap(_) => SOFTCAP,
                OutputMap::Relu2 => RELU2,
            }
            | match a.pairs {
                Some(Pairs::Glu(act)) => glu_flags(act),
                Some(_) => PAIRS,
                None => 0,
            };
        // A gated activation writes one column for each pair of outputs.
        let per_column = if matches!(a.pairs, Some(Pairs::Glu(_))) {
            2
        } else {
            1
        };
        let epilogue = match a.pairs {
            Some(Pairs::Rotary(_)) => PairEpilogue::Rotary,
            _ => PairEpilogue::Glu,
        };
        let rowwise = kernels.rowwise && a.w.cols.is_multiple_of(8);
        // The subgroup kernel reads octets, so K must be a multiple of 8.
        let subgroup_rows = kernels.matvec_rows.filter(|_| a.w.cols.is_multiple_of(8));
        // So does the cooperative-matrix kernel.
        let coop = kernels.cooperative.filter(|_| a.w.cols.is_multiple_of(8));
        // The (few rows, many rows) kernels for a chunk's format: the chunks of a stacked
        // matrix may differ.
        let get = |name, f, extra: &[(&'static str, f64)]| {
            let c: Vec<_> = constants.iter().chain(extra).copied().collect();
            kernels.get_matrix(name, f, epilogue, &c)
        };
        let subgroup_tiles = rowwise && kernels.rowwise_subgroups;
        let samples = a.sample_rows;
        // The subgroup kernel's uniform bindings of x, each a stand-in where x does not reach
        // past its 64 KiB or its start is misaligned (then no tile reads it).
        let align = u64::from(ctx.device.limits().min_uniform_buffer_offset_alignment);
        let x_head_at = x_head_offsets(a.w.cols as u64);
        let bound = x_head_at.map(|at| at % align == 0 && a.x.size() >= at + X_HEAD_BYTES);
        let x_head_dummy =
            (subgroup_tiles && bound.contains(&false)).then(|| ctx.placeholder(X_HEAD_BYTES));
        let extra: Vec<_> = if subgroup_tiles {
            let binding = |i: usize| match (bound[i], &x_head_dummy) {
                (false, Some(dummy)) => dummy.as_entire_buffer_binding(),
                _ => wgpu::BufferBinding {
                    buffer: a.x,
                    offset: x_head_at[i],
                    size: std::num::NonZeroU64::new(X_HEAD_BYTES),
                },
            };
            vec![
                (X_HEAD_BINDINGS[0], binding(0)),
                (X_HEAD_BINDINGS[1], binding(1)),
            ]
        } else {
            Vec::new()
        };
        // A chunk's kernels with their grids, by the most rows each takes (the last: any).
        let tiers = |f, n: u32| -> Vec<(u32, Arc<Kernel>, Grid)> {
            if subgroup_tiles {
                let mut tiers = Vec::new();
                for (i, t) in SUBGROUP_TILES.iter().enumerate() {
                    let kernel =
                        |uniform_x| get("matmul_rowwise_subgroup", f, &t.constants(uniform_x));
                    let last = i + 1 == SUBGROUP_TILES.len();
                    // Steps of up to `t.rows` rows read x through the uniform bindings where
                    // they hold the rows; the last tile also takes any number, from storage.
                    let uniform_x = t.reads_x_head(a.w.cols as u64, bound);
                    if !last || uniform_x {
                        tiers.push((t.rows, kernel(uniform_x), t.grid(n, samples)));
                    }
                    if last {
                        tiers.push((u32::MAX, kernel(false), t.grid(n, samples)));
                    }
                }
                return tiers;
            }
            let tiles = |x, per| Grid::Tiles { x, per, samples };
            if rowwise {
                // The matrix-vector kernel (4 outputs of a row per invocation) is the faster
                // for a single row; at 2 rows the two ran alike and from 4 on the 8 x 32
                // tiles, which dequantize each weight once for all their rows, win.
                return vec![
                    (
                        1,
                        get("matvec_rowwise", f, &[]),
                        tiles(n.div_ceil(ROWWISE_MATVEC_OUTPUTS), 1),
                    ),
                    (
                        u32::MAX,
                        get("matmul_rowwise", f, &[]),
                        tiles(n.div_ceil(ROWWISE_TILE.0), ROWWISE_TILE.1),
                    ),
                ];
            }
            let (few, matvec) = match subgroup_rows {
                Some(rows) => (
                    rows,
                    get(
                        "matvec_subgroup",
                        f,
                        &[
                            ("MAX_ROWS", rows as f64),
                            ("WG", kernels.matvec_workgroup as f64),
                        ],
                    ),
                ),
                None => (MATVEC_MAX_ROWS, get("matvec", f, &[])),
            };
            // Many rows on cooperative matrices where the device has them (a tile of 4
            // matrices a side, four subgroups a workgroup), else the tiled kernel.
            let many = match coop {
                // f32 matrices hold weights beyond f16's range.
                Some(side) if f != WeightFormat::F32 => {
                    let wg = 4 * ctx.info.subgroup_min_size;
                    let kernel = get("matmul_coop", f, &[("WG", wg as f64)]);
                    (kernel, tiles(n.div_ceil(4 * side), 4 * side))
                }
                _ => (get("matmul", f, &[]), tiles(n.div_ceil(64), 32)),
            };
            vec![
                (few, matvec, Grid::Fixed([n.div_ceil(4), 1, 1])),
                (u32::MAX, many.0, many.1),
            ]
        };
        let mut launches: Vec<(u32, Vec<Launch>)> = Vec::new();
        let no_gain = ctx.placeholder(16);
        for c in &a.w.chunks {
            let bias = match a.bias {
                Some(b) => {
                    // Each chunk reads its own slice of the bias.
                    let bytes = c.rows as u64 * 4;
                    let slice = ctx.storage("bias chunk", bytes);
                    let mut enc = ctx.device.create_command_encoder(&Default::default());
                    enc.copy_buffer_to_buffer(
                        b,
                        c.row_offset as u64 * 4,
                        &slice,
                        0,
                        bytes.next_multiple_of(4),
                    );
                    ctx.queue.submit([enc.finish()]);
                    slice
                }
                None => ctx.placeholder(16),
            };
            let p = super::params(
                ctx,
                "matmul",
                &Params {
                    k: a.w.cols as u32,
                    n: c.rows,
                    out_offset: a.out_offset + c.row_offset / per_column,
                    ldy: a.ldy,
                    flags,
                    eps: a.norm.map_or(0.0, |n| n.1),
                    so: c.scale_offset,
                    factor: match a.map {
                        OutputMap::Identity | OutputMap::Relu2 => 1.0,
                        OutputMap::Scale(f) | OutputMap::SoftCap(f) => f,
                    },
                },
            );
            let mut buffers = vec![
                step,
                &p,
                a.x,
                &c.buffer,
                &bias,
                a.y,
                a.norm.map_or(&no_gain, |n| n.0),
            ];
            if let Some(Pairs::Rotary(r)) = &a.pairs {
                buffers.extend([r.positions, r.slot_mapping, r.rope, r.k_cache, r.v_cache]);
            }
            for (i, (max_rows, kernel, grid)) in tiers(c.format, c.rows).into_iter().enumerate() {
                if i == launches.len() {
                    launches.push((max_rows, Vec::new()));
                }
                let launch = Launch::with_extra(&ctx.device, kernel, &buffers, &extra, grid);
                (launches[i].1).push(launch);
            }
        }
        let mut formats: Vec<String> = Vec::new();
        for c in &a.w.chunks {
            let f = format!("{:?}", c.format);
            if !formats.contains(&f) {
                formats.push(f);
            }
        }
        let epilogue = match (&a.pairs, a.accumulate) {
            (Some(Pairs::Glu(_)), _) => ", gated activation",
            (Some(Pairs::Rotary(_)), _) => ", rotary + KV write",
            (None, true) => ", into the residual",
            (None, false) => "",
        };
        let label = format!(
            "matmul {} x {} {}{epilogue}",
            a.w.rows,
            a.w.cols,
            formats.join("/")
        );
        Ok(Self {
            launches,
            sample_rows: a.sample_rows,
            label,
        })
    }
}

impl Recorded for Matmul {
    /// Records the product's dispatches (one per chunk).
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32, samples: u32) -> u32 {
        let rows = if self.sample_rows { samples } else { tokens };
        if rows == 0 {
            return 0;
        }
        let (_, launches) = (self.launches.iter())
            .find(|(max_rows, _)| rows <= *max_rows)
            .expect("the last launches take any number of rows");
        launches
            .iter()
            .map(|l| l.record(pass, tokens, samples))
            .sum()
    }

    fn label(&self) -> String {
        self.label.clone()
    }
}
