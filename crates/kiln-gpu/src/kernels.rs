//! The kernel table: one WGSL file per kernel under `shaders/`, compiled once per device and
//! cached by name, weight format and pipeline-override constants, with the choices of kernel
//! that follow from the device, the family and the tuning variables. Kernels that read a
//! weight matrix get their format's file (`shaders/weights_*.wgsl`, which declares the weight
//! binding and its `w_pair` / `w_octet` readers) appended to their source, and the matrix
//! kernels their epilogue ([`PairEpilogue`]): WGSL has no includes, and this keeps one kernel
//! file for every format and epilogue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{KernelFamily, WeightFormat};

/// A compiled compute pipeline and the name of its WGSL file.
pub struct Kernel {
    pub name: &'static str,
    pub pipeline: wgpu::ComputePipeline,
}

impl Kernel {
    /// A bind group whose binding `i` is the whole of `buffers[i]`.
    pub fn bind(&self, device: &wgpu::Device, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        self.bind_with(device, buffers, &[])
    }

    /// The same, plus the numbered bindings of `extra`.
    pub fn bind_with(
        &self,
        device: &wgpu::Device,
        buffers: &[&wgpu::Buffer],
        extra: &[(u32, wgpu::BufferBinding<'_>)],
    ) -> wgpu::BindGroup {
        let whole = (buffers.iter().enumerate()).map(|(i, b)| (i as u32, b.as_entire_binding()));
        let numbered = (extra.iter()).map(|(i, b)| (*i, wgpu::BindingResource::Buffer(b.clone())));
        let entries: Vec<_> = whole
            .chain(numbered)
            .map(|(binding, resource)| wgpu::BindGroupEntry { binding, resource })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.name),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }
}

macro_rules! kernel_table {
    ($table:ident: $($name:literal),* $(,)?) => {
        const $table: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../../shaders/", $name, ".wgsl")))),*
        ];
    };
}

kernel_table!(
    SOURCES:
    "embedding",
    "matmul",
    "matmul_coop",
    "matvec",
    "matvec_subgroup",
    "matvec_rowwise",
    "matmul_rowwise",
    "matmul_rowwise_subgroup",
    "moe_matvec",
    "moe_matmul_subgroup",
    "moe_group",
    "moe_route",
    "moe_shared_gate",
    "rope_kv",
    "attention",
    "attention_reduce",
    "attention_rowwise",
    "attention_rowwise_subgroup",
    "glu",
    "ungated",
    "lora_shrink",
    "lora_expand",
    "gather_rmsnorm",
    "residual_rmsnorm",
    "layer_norm",
    "sample",
    "prev_tokens",
    "table_writes",
    "read_bandwidth",
);

/// The matrix kernels, which share `shaders/matmul_epilogue.wgsl` and one pair epilogue
/// (appended like a format).
const MATRIX_KERNELS: [&str; 9] = [
    "matmul",
    "matmul_coop",
    "matvec",
    "matvec_subgroup",
    "matvec_rowwise",
    "matmul_rowwise",
    "matmul_rowwise_subgroup",
    "moe_matvec",
    "moe_matmul_subgroup",
];
const EPILOGUE: &str = include_str!("../../../shaders/matmul_epilogue.wgsl");
const EPILOGUE_GLU: &str = include_str!("../../../shaders/epilogue_glu.wgsl");
const EPILOGUE_ROTARY: &str = include_str!("../../../shaders/epilogue_rotary.wgsl");
/// The gated activations, shared by `glu.wgsl` and `epilogue_glu.wgsl`.
const ACTIVATION: &str = include_str!("../../../shaders/activation.wgsl");
/// A workgroup's sum, shared by the per-row norms.
const WORKGROUP_SUM: &str = include_str!("../../../shaders/workgroup_sum.wgsl");
/// The KV cache's element types, shared by the kernels that read or write the cache.
const KV_CODEC: &str = include_str!("../../../shaders/kv_codec.wgsl");
/// The octet type the weight formats return, appended after each format file.
const OCTET: &str = include_str!("../../../shaders/octet.wgsl");
/// An octet of x from 8 lanes' loads, shared by the row-wise subgroup matrix kernels.
const LANE_OCTET: &str = include_str!("../../../shaders/lane_octet.wgsl");
/// OUTS weight rows against a row of x, shared by the row-wise products of a row a lane.
const ROW_DOTS: &str = include_str!("../../../shaders/row_dots.wgsl");
/// Gemma 2's soft cap, shared by the attention kernels and the matrix epilogue.
const SOFT_CAP: &str = include_str!("../../../shaders/soft_cap.wgsl");
/// Each query head's sink logit, shared by the attention kernels and their reduce pass.
const ATTENTION_SINK: &str = include_str!("../../../shaders/attention_sink.wgsl");
/// ALiBi's biases on the scores, shared by the attention kernels.
const ALIBI: &str = include_str!("../../../shaders/alibi.wgsl");
/// The attention kernels' parameters.
const ATTENTION_PARAMS: &str = include_str!("../../../shaders/attention_params.wgsl");
const ATTENTION_KERNELS: [&str; 3] = [
    "attention",
    "attention_rowwise",
    "attention_rowwise_subgroup",
];
const KV_KERNELS: [&str; 4] = [
    "rope_kv",
    "attention",
    "attention_rowwise",
    "attention_rowwise_subgroup",
];

/// What a matrix kernel makes of its output pairs (flag 16 of `shaders/matmul_epilogue.wgsl`):
/// the pair epilogue the loader appends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PairEpilogue {
    /// `shaders/epilogue_glu.wgsl`: (gate, up) pairs into a gated activation.
    #[default]
    Glu,
    /// `shaders/epilogue_rotary.wgsl`: q and k rotated, k and v written to the KV cache.
    /// Its pipelines take the override constants that file declares.
    Rotary,
}

kernel_table!(
    FORMATS: "weights_f16",
    "weights_f16x4",
    "weights_f32",
    "weights_q8_0",
    "weights_q4_0",
    "weights_q4_1",
    "weights_q5_0",
    "weights_q5_1",
    "weights_q2_k",
    "weights_q3_k",
    "weights_q4_k",
    "weights_q4_kx4",
    "weights_q5_k",
    "weights_q6_k",
    "weights_mxfp4",
    "weights_iq4_nl",
    "weights_iq4_xs",
);

/// The format files that decode sub-block scales through `shaders/kquant_scales.wgsl`.
const K_QUANT_FORMATS: [&str; 3] = ["weights_q4_k", "weights_q4_kx4", "weights_q5_k"];
const K_QUANT_SCALES: &str = include_str!("../../../shaders/kquant_scales.wgsl");
/// The format files that look their nibbles' levels up through `shaders/iq4_levels.wgsl`.
const IQ4_FORMATS: [&str; 2] = ["weights_iq4_nl", "weights_iq4_xs"];
const IQ4_LEVELS: &str = include_str!("../../../shaders/iq4_levels.wgsl");
/// The format files whose blocks of 32 nibbles `shaders/nibble_blocks.wgsl` walks.
const NIBBLE_FORMATS: [&str; 3] = ["weights_q4_0", "weights_iq4_nl", "weights_mxfp4"];
const NIBBLE_BLOCKS: &str = include_str!("../../../shaders/nibble_blocks.wgsl");

/// Kernels compiled without naga's guard against infinite loops, so that the driver sees
/// their trip counts and unrolls them: on lavapipe that made the row-wise attention about
/// 1.3x faster for 8 sequences and for prefill, and the plain row-wise matrix tile slower
/// (BENCHMARKS.md). The subgroup matrix kernel needs it: its tile of accumulators stays in
/// registers only once the loops over it unroll. On an H200 the GPU family's attention spent
/// 140 us a layer on one decoding sequence of 32 keys with the guard, each load of its
/// staging and value loops waiting for the one before (BENCHMARKS.md). The LoRA kernels'
/// accumulators, a vec4 per row of a tile, stay in registers only so too.
/// `KILN_UNBOUNDED_LOOPS` (kernel names, comma-separated; empty for none) replaces the list,
/// for measuring what it gains on a new device.
const UNBOUNDED_LOOPS: &[&str] = &[
    "attention_rowwise_subgroup",
    "matmul_rowwise_subgroup",
    "moe_matmul_subgroup",
    "attention",
    "attention_reduce",
    "lora_shrink",
    "lora_expand",
];

/// Kernels that read weights only as whole octets, which take f16 and Q4_K weights through
/// `weights_f16x4.wgsl` and `weights_q4_kx4.wgsl` (16-byte loads; K is a multiple of 8
/// wherever they run, and a Q4_K block is nine 16-byte words).
const OCTET_KERNELS: &[&str] = &["matvec_subgroup", "matmul_coop"];

/// Compiles kernels on first use and hands out shared handles afterwards.
pub struct Kernels {
    device: wgpu::Device,
    /// Keyed by file name and the override constants the pipeline was built with.
    cache: Mutex<HashMap<String, Arc<Kernel>>>,
    /// Use the row-wise kernels (`*_rowwise.wgsl`: no workgroup memory, no barriers, one output
    /// row or tile per invocation) for matmul and attention instead of the tiled ones. The
    /// default on CPU-backed adapters, where a workgroup is a loop over SIMD lanes and barriers
    /// cost more than shared loads save.
    pub rowwise: bool,
    /// Most rows the subgroup matrix-vector kernel takes, where the adapter has subgroups and
    /// the tiled family runs (`None` otherwise): above it the tiled matmul does.
    pub matvec_rows: Option<u32>,
    /// The row-wise kernels that share loads across a subgroup of 8 lanes, where the row-wise
    /// family runs and the adapter has subgroups of at least 8: attention through
    /// `attention_rowwise_subgroup.wgsl` (8 query rows a subgroup, each key read once for them)
    /// rather than `attention_rowwise.wgsl` (a row a lane), and products of more than one row
    /// through `matmul_rowwise_subgroup.wgsl` (each element of x loaded once for the subgroup)
    /// rather than `matmul_rowwise.wgsl`.
    pub rowwise_subgroups: bool,
    /// Invocations per workgroup of `matvec_subgroup.wgsl` (its `WG`): 256 where subgroups are
    /// at least 16 wide, 64 otherwise; `KILN_MATVEC_WORKGROUP` overrides it for tuning.
    pub matvec_workgroup: u32,
    /// The formats read 16 bytes at a time in the kernels that read octets (`OCTET_KERNELS`):
    /// f16 by default; `KILN_WIDE_LOADS=f16,q4_k` (or empty for none) sets them, for measuring
    /// what they gain. Q4_K's wide reader ran no faster on lavapipe and has not run on a GPU.
    pub wide_loads: Vec<WeightFormat>,
    /// The side of the cooperative matrices the tiled family's product of many rows runs on
    /// (`matmul_coop.wgsl`, in place of `matmul.wgsl`), where the device has them
    /// ([`crate::GpuContext::cooperative_matrix`]) and `KILN_COOPERATIVE_MATRIX=1` asks for
    /// them: off by default until the kernel has been measured on a GPU.
    pub cooperative: Option<u32>,
    /// Whether a mixture of experts' steps of many tokens run the grouped product
    /// (`crate::ops::expert_matmul`): where the adapter has subgroups of at least 8, in
    /// either family (measured on lavapipe; on a GPU it reads each expert's weights once a
    /// tile of 8 tokens where the per-token product reads them once a token, unmeasured).
    pub moe_grouped: bool,
    /// Steps of at least this many tokens run the grouped product where it runs:
    /// `KILN_MOE_GROUPED_FROM` sets it for tuning (`None`: [`crate::ops::grouped_from`] the
    /// model's experts).
    pub moe_grouped_from: Option<u32>,
    /// Kernels compiled without naga's loop guard (`UNBOUNDED_LOOPS`).
    unbounded: Vec<String>,
}

/// Rows up to which `matvec_subgroup.wgsl` beats the tiled matmul; `KILN_MATVEC_MAX_ROWS`
/// overrides it for tuning on a new device (0 turns the kernel off).
const MATVEC_SUBGROUP_ROWS: u32 = 64;

impl Kernels {
    /// The kernels of the family [`KernelFamily::Auto`] picks for the device.
    pub fn new(ctx: &crate::GpuContext) -> Self {
        Self::for_family(ctx, KernelFamily::Auto)
    }

    pub fn for_family(ctx: &crate::GpuContext, family: KernelFamily) -> Self {
        let rowwise = family.rowwise(ctx.info.device_type);
        let rows = std::env::var("KILN_MATVEC_MAX_ROWS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MATVEC_SUBGROUP_ROWS);
        let subgroups = ctx.features.contains(wgpu::Features::SUBGROUP);
        let env = |name| std::env::var(name).ok();
        // 256 invocations need subgroups of 16 to stay within the kernel's 16 partial sums.
        let widest = (ctx.info.subgroup_min_size * 16).min(256);
        let matvec_workgroup = env("KILN_MATVEC_WORKGROUP")
            .and_then(|v| v.parse().ok())
            .filter(|&w: &u32| w.is_multiple_of(ctx.info.subgroup_min_size.max(1)))
            .unwrap_or(if widest >= 256 { 256 } else { 64 })
            .clamp(64, widest.max(64));
        Self {
            device: ctx.device.clone(),
            cache: Mutex::new(HashMap::new()),
            rowwise,
            matvec_rows: (subgroups && !rowwise && rows > 0).then_some(rows),
            rowwise_subgroups: rowwise
                && subgroups
                && ctx.info.subgroup_min_size >= 8
                && ctx.limits.max_uniform_buffer_binding_size >= crate::ops::X_HEAD_BYTES,
            matvec_workgroup,
            wide_loads: match env("KILN_WIDE_LOADS") {
                Some(v) => kiln_model::DType::ALL
                    .into_iter()
                    .filter(|t| {
                        v.split(',')
                            .any(|f| f.trim().eq_ignore_ascii_case(&t.name()))
                    })
                    .map(WeightFormat::for_dtype)
                    .collect(),
                None => vec![WeightFormat::F16],
            },
            cooperative: ctx
                .cooperative_matrix
                .filter(|_| !rowwise && env("KILN_COOPERATIVE_MATRIX").as_deref() == Some("1")),
            moe_grouped: subgroups && ctx.info.subgroup_min_size >= 8,
            moe_grouped_from: env("KILN_MOE_GROUPED_FROM").and_then(|v| v.parse().ok()),
            unbounded: match env("KILN_UNBOUNDED_LOOPS") {
                Some(v) => v.split(',').map(|s| s.trim().to_string()).collect(),
                None => UNBOUNDED_LOOPS.iter().map(|s| s.to_string()).collect(),
            },
        }
    }

    /// The same, with the kernel family chosen by the caller (tests use both).
    pub fn with_rowwise(ctx: &crate::GpuContext, rowwise: bool) -> Self {
        Self::for_family(
            ctx,
            if rowwise {
                KernelFamily::Cpu
            } else {
                KernelFamily::Gpu
            },
        )
    }

    /// The kernel of `shaders/{name}.wgsl`. Panics on an unknown name (a programming error).
    pub fn get(&self, name: &str) -> Arc<Kernel> {
        self.get_with(name, &[])
    }

    /// The kernel of `shaders/{name}.wgsl` with its WGSL `override` constants set to
    /// `constants` (booleans as 0 or 1); each distinct set is its own cached pipeline.
    pub fn get_with(&self, name: &str, constants: &[(&str, f64)]) -> Arc<Kernel> {
        self.compile(name, None, PairEpilogue::Glu, constants)
    }

    /// The kernel of `shaders/{name}.wgsl` reading weights in `format`.
    pub fn get_for(&self, name: &str, format: WeightFormat) -> Arc<Kernel> {
        self.compile(name, Some(format), PairEpilogue::Glu, &[])
    }

    /// The same with override constants, as [`Kernels::get_with`].
    pub fn get_for_with(
        &self,
        name: &str,
        format: WeightFormat,
        constants: &[(&str, f64)],
    ) -> Arc<Kernel> {
        self.compile(name, Some(format), PairEpilogue::Glu, constants)
    }

    /// A matrix kernel reading `format` with the pair epilogue `pairs` and its constants.
    pub fn get_matrix(
        &self,
        name: &str,
        format: WeightFormat,
        pairs: PairEpilogue,
        constants: &[(&str, f64)],
    ) -> Arc<Kernel> {
        self.compile(name, Some(format), pairs, constants)
    }

    fn compile(
        &self,
        name: &str,
        format: Option<WeightFormat>,
        pairs: PairEpilogue,
        constants: &[(&str, f64)],
    ) -> Arc<Kernel> {
        let mut cache = self.cache.lock().expect("kernel cache poisoned");
        let find = |table: &[(&'static str, &'static str)], name: &str| {
            *table
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("no kernel named {name}"))
        };
        let (name, source) = find(SOURCES, name);
        let weights = format.map(|f| {
            let wide = match f {
                WeightFormat::F16 => Some("weights_f16x4"),
                WeightFormat::Q4_K => Some("weights_q4_kx4"),
                _ => None,
            }
            .filter(|_| self.wide_loads.contains(&f) && OCTET_KERNELS.contains(&name));
            find(FORMATS, wide.unwrap_or(f.shader()))
        });
        let matrix = MATRIX_KERNELS.contains(&name);
        let mut key = weights
            .iter()
            .fold(name.to_string(), |k, (w, _)| format!("{k}+{w}"));
        if matrix {
            key = format!("{key}+{pairs:?}");
        }
        let coop = (name == "matmul_coop").then(|| {
            let side = self
                .cooperative
                .expect("matmul_coop needs cooperative matrices");
            coop_sizes(side)
        });
        if let Some(sizes) = &coop {
            key = format!("{key}+{sizes}");
        }
        let key = constants
            .iter()
            .fold(key, |k, (c, v)| format!("{k} {c}={v}"));
        cache
            .entry(key)
            .or_insert_with(|| {
                let mut source = match weights {
                    Some((f, w)) => {
                        // What formats share: the K-quants' scale decoding, the IQ4 formats'
                        // table of levels, the walk over blocks of 32 nibbles.
                        let shared = [
                            (&K_QUANT_FORMATS[..], K_QUANT_SCALES),
                            (&IQ4_FORMATS, IQ4_LEVELS),
                            (&NIBBLE_FORMATS, NIBBLE_BLOCKS),
                        ];
                        (shared.iter())
                            .filter(|(formats, _)| formats.contains(&f))
                            .fold(format!("{source}\n{w}\n{OCTET}"), |s, (_, text)| {
                                s + "\n" + text
                            })
                    }
                    None => source.to_string(),
                };
                // The fragments a kernel calls into, as with the formats.
                let fragments: &[&str] = match (matrix, pairs) {
                    (true, PairEpilogue::Glu) => &[EPILOGUE, SOFT_CAP, EPILOGUE_GLU, ACTIVATION],
                    (true, PairEpilogue::Rotary) => {
                        &[EPILOGUE, SOFT_CAP, EPILOGUE_ROTARY, KV_CODEC]
                    }
                    _ if name == "glu" || name == "ungated" => &[ACTIVATION],
                    _ if matches!(name, "residual_rmsnorm" | "gather_rmsnorm" | "layer_norm") => {
                        &[WORKGROUP_SUM]
                    }
                    _ if ATTENTION_KERNELS.contains(&name) => {
                        &[ATTENTION_PARAMS, KV_CODEC, SOFT_CAP, ATTENTION_SINK, ALIBI]
                    }
                    _ if name == "attention_reduce" => &[ATTENTION_SINK],
                    _ if KV_KERNELS.contains(&name) => &[KV_CODEC],
                    _ => &[],
                };
                let walk = match name {
                    "matmul_rowwise_subgroup" | "moe_matmul_subgroup" => Some(LANE_OCTET),
                    "matvec_rowwise" | "moe_matvec" => Some(ROW_DOTS),
                    _ => None,
                };
                for f in (fragments.iter()).chain(&coop.as_deref()).chain(&walk) {
                    source = format!("{source}\n{f}");
                }
                let desc = wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                };
                let module = if self.unbounded.iter().any(|u| u == name) {
                    // Bounds checks stay; the guard naga adds to every loop against infinite
                    // ones goes: it hides each loop's trip count from the driver's compiler,
                    // which then unrolls none of them, and arrays indexed in them stay in
                    // memory.
                    let checks = wgpu::ShaderRuntimeChecks {
                        force_loop_bounding: false,
                        ..wgpu::ShaderRuntimeChecks::checked()
                    };
                    // SAFETY: the loops of these kernels run counts bounded by uniforms,
                    // override constants, literals or the step's positions (which the runner
                    // writes within the context length), so none is infinite.
                    unsafe { self.device.create_shader_module_trusted(desc, checks) }
                } else {
                    self.device.create_shader_module(desc)
                };
                let pipeline =
                    self.device
                        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                            label: Some(name),
                            layout: None,
                            module: &module,
                            entry_point: Some("main"),
                            compilation_options: wgpu::PipelineCompilationOptions {
                                constants,
                                ..Default::default()
                            },
                            cache: None,
                        });
                Arc::new(Kernel { name, pipeline })
            })
            .clone()
    }
}

/// The matrix types and side `matmul_coop.wgsl` is compiled with, for matrices of `side`.
fn coop_sizes(side: u32) -> String {
    let ty = format!("coop_mat{side}x{side}");
    format!(
        "alias CoopA = {ty}<f16, A>;\nalias CoopB = {ty}<f16, B>;\n\
         alias CoopC = {ty}<f32, C>;\nconst CM: u32 = {side}u;\n"
    )
}
