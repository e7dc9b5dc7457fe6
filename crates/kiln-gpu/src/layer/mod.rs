//! One decoder layer's launches, built once from its architecture's operations
//! ([`kiln_model::Layer`]) in their order: each normed projection is a matrix product with the
//! RMSNorm fused in, the rotary step also writes the KV cache, attention is paged, and a
//! projection into the residual stream accumulates into it. Two launches fold into the product
//! before them, whose rows are arranged at load so that the epilogue gets the outputs it needs
//! in pairs ([`RowOrder`]): the rotary step and the KV write into the QKV product where there is
//! no q/k norm, and the gated activation into the gate/up product where gate and up share a
//! format. Neither folds where a LoRA adapter adapts the product: its launches
//! ([`ops::Lora`]) add to the product's outputs before the rotary step or the activation.

mod activations;
mod experts;
mod fusion;
mod lora;
mod row_order;
mod upload;

use kiln_model::{Buf, ModelConfig, Op, Weights};

pub(crate) use self::activations::{Activations, ExpertBuffers};
pub(crate) use self::fusion::needs_gate_up;
use self::fusion::{activation_map, fuses_glu};
use self::lora::lora_launch;
pub(crate) use self::lora::{LoraSetup, lora_bytes};
pub(crate) use self::row_order::RowOrder;
use self::upload::Upload;
pub(crate) use self::upload::gain;
use crate::ops::{self, AttentionBuffers, Matmul, MatmulArgs, OutputMap, Pairs, Rotary};
use crate::{
    GpuContext, GpuError, GpuMatrix, Kernels, KvCache, KvDtype, Launch, Recorded, RunnerConfig,
    StepInputs,
};

/// Uploads a stack of matrices (name, rows) of `cols` columns as one, its rows in `order`.
pub(crate) type UploadMatrix<'a> =
    dyn Fn(&str, &[(&str, usize)], usize, RowOrder) -> Result<GpuMatrix, GpuError> + 'a;

/// What every layer's build reads.
pub(crate) struct LayerContext<'a> {
    pub ctx: &'a GpuContext,
    pub kernels: &'a Kernels,
    pub config: &'a ModelConfig,
    pub rc: &'a RunnerConfig,
    pub inputs: &'a StepInputs,
    pub kv: &'a KvCache,
    pub bufs: &'a Activations,
    /// Each layer's rotary table (layers with the same frequencies share one).
    pub rope: &'a [&'a wgpu::Buffer],
    pub matrix: &'a UploadMatrix<'a>,
    pub weights: &'a Weights,
    /// The LoRA adapters and the room for more.
    pub lora: LoraSetup<'a>,
}

/// One operation's launch.
enum Step {
    Matmul(Matmul),
    Attention(ops::Attention),
    Launch(Launch),
    /// Recorded only on steps where some token runs through an adapter; with the order of
    /// the product's rows, for writing an adapter's slot later.
    Lora(ops::Lora, RowOrder),
}

pub(crate) struct Layer {
    steps: Vec<Step>,
}
impl Layer {
    /// Layer `i`'s launches and the bytes of its weights on the GPU.
    pub fn new(
        l: &LayerContext,
        i: usize,
        layer: &kiln_model::Layer,
    ) -> Result<(Layer, u64), GpuError> {
        let (ctx, c, b) = (l.ctx, l.config, l.bufs);
        let (nh, nkv, d) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let eps = c.rms_norm_eps;
        let step = &l.inputs.step;
        let mut up = Upload::new(l);
        let mut lora_bytes = 0u64;
        let mm = |args: MatmulArgs<'_>| Matmul::new(ctx, l.kernels, step, args);
        let window = c.layer_window(i);
        let (inputs, kv) = (l.inputs, l.kv);
        // q and k in the rotary pair layout, from the product to the cache.
        let qk_order = RowOrder::Rotary {
            rows: (nh + nkv) * d,
            head_dim: d,
            rotary_dim: c.rotary_dim(),
        };
        let rotary = Rotary {
            heads: (nh, nkv, d),
            kv_dtype: l.rc.kv_dtype,
            max_positions: l.rc.max_model_len,
            positions: &inputs.positions,
            slot_mapping: &inputs.slot_mapping,
            rope: l.rope[i],
            k_cache: &kv.k[i],
            v_cache: &kv.v[i],
        };
        // The rotary epilogue binds more storage buffers than a plain product, and writes a
        // pair of outputs at a time, where a q8_0 cache's scales need whole groups.
        let rotary_epilogue = ctx.limits.max_storage_buffers_per_shader_stage
            >= ops::ROTARY_STORAGE_BINDINGS
            && l.rc.kv_dtype != KvDtype::Q8;
        let mut steps = Vec::with_capacity(layer.ops.len());
        let mut ops = layer.ops.iter().peekable();
        let mut adapters = None;
        // The rows of the last normed product: the width of the MLP (dense or a shared
        // expert's) whose activation follows.
        let mut mlp_rows = 0;
        while let Some(op) = ops.next() {
            steps.push(match op {
                Op::NormedProject {
                    src,
                    norm,
                    weights,
                    bias,
                    dst,
                } => {
                    let x = b.get(ctx, *src)?;
                    let lora = l.lora.adapts(weights);
                    // Gate/up followed by the activation: one launch if the rows pair up.
                    let gated = !lora && fuses_glu(*dst, bias.is_some(), ops.peek().copied());
                    let order = match *dst {
                        Buf::Qkv => qk_order,
                        Buf::GateUp if gated => RowOrder::GateUp,
                        _ => RowOrder::Stacked,
                    };
                    let (w, rows) = up.stack(&weights.iter().collect::<Vec<_>>(), order)?;
                    mlp_rows = rows as usize;
                    let gain = match norm {
                        Some(n) => Some(up.gains(&[n], RowOrder::Stacked)?),
                        None => None,
                    };
                    let norm = gain.as_ref().map(|g| (g, eps));
                    if w.paired {
                        ops.next();
                        steps.push(Step::Matmul(mm(MatmulArgs {
                            x,
                            w: &w,
                            bias: None,
                            y: &b.act,
                            ldy: rows / 2,
                            out_offset: 0,
                            norm,
                            accumulate: false,
                            sample_rows: false,
                            map: OutputMap::Identity,
                            pairs: Some(Pairs::Glu(c.activation)),
                        })?));
                        continue;
                    }
                    let bias = match bias {
                        Some(parts) => {
                            let mut v = Vec::new();
                            for p in parts {
                                v.extend(up.vector(p)?);
                            }
                            let v: Vec<f32> = (0..v.len()).map(|r| v[order.source(r)]).collect();
                            Some(ctx.storage_init(&parts[0].name, bytemuck::cast_slice(&v)))
                        }
                        None => None,
                    };
                    // (The output buffer is taken only here: a gate/up product that carries
                    // the activation writes none, and its buffer is not made.)
                    let y = b.get(ctx, *dst)?;
                    if lora {
                        let x = (x, norm);
                        adapters = lora_launch(l, weights, order, x, (y, rows), &mut lora_bytes)?;
                    }
                    // QKV followed by a rotary step without a q/k norm: one launch.
                    let fused = *dst == Buf::Qkv
                        && !lora
                        && rotary_epilogue
                        && matches!(ops.peek(), Some(Op::Rotary { qk_norm: None, .. }));
                    if fused {
                        ops.next();
                    }
                    // A MLP's one product followed by its activation (no gate): one launch,
                    // unless an adapter adds to the product after it or the epilogue has no
                    // such activation (GELU's).
                    let activated = !lora
                        && matches!(ops.peek(), Some(Op::Activation))
                        && activation_map(c.activation).is_ok();
                    if activated {
                        ops.next();
                    }
                    Step::Matmul(mm(MatmulArgs {
                        x,
                        w: &w,
                        bias: bias.as_ref(),
                        y,
                        ldy: rows,
                        out_offset: 0,
                        norm,
                        accumulate: false,
                        sample_rows: false,
                        map: match activated {
                            true => activation_map(c.activation)?,
                            false => OutputMap::Identity,
                        },
                        pairs: fused.then(|| Pairs::Rotary(rotary.clone())),
                    })?)
                }
                Op::Rotary {
                    qk_norm,
                    norm_after,
                } => {
                    // Gains as wide as q: over all of q (OLMo 2), or each head's own
                    // (Command-R+'s LayerNorms).
                    let layer_norm = c.qk_layer_norm;
                    let qk_gain = match qk_norm {
                        Some([q, k]) => {
                            Some((up.gains(&[q, k], qk_order)?, q.len() != d && !layer_norm))
                        }
                        None => None,
                    };
                    if *norm_after && qk_gain.as_ref().is_some_and(|(_, whole)| *whole) {
                        return Err(GpuError::Shape {
                            op: "rope_kv",
                            detail: "q and k normalized whole after they turn".into(),
                        });
                    }
                    Step::Launch(ops::rope_kv(
                        ctx,
                        l.kernels,
                        step,
                        &rotary,
                        &b.qkv,
                        qk_gain.as_ref().map(|(g, whole)| ops::QkNorm {
                            gains: g,
                            eps,
                            whole: *whole,
                            layer_norm,
                            after: *norm_after,
                        }),
                    ))
                }
                Op::Attention { sinks } => Step::Attention(ops::attention(
                    ctx,
                    l.kernels,
                    step,
                    (nh, nkv, d),
                    ops::Scores {
                        window,
                        scale: c.attention_scale(),
                        softcap: c.attn_softcap,
                        alibi: c.alibi,
                        sinks: match sinks {
                            Some(t) => Some(up.vector(t)?),
                            None => None,
                        },
                    },
                    l.rc.kv_dtype,
                    AttentionBuffers {
                        positions: &inputs.positions,
                        token_seq: &inputs.token_seq,
                        seq_info: &inputs.seq_info,
                        block_tables: &inputs.block_tables,
                        qkv: &b.qkv,
                        k_cache: &kv.k[i],
                        v_cache: &kv.v[i],
                        out: &b.attn,
                        runs: &b.runs,
                    },
                    ops::SPLIT_TOKENS.min(l.rc.max_tokens as u32),
                )?),
                Op::Project {
                    src,
                    weight,
                    bias,
                    dst,
                } => {
                    let (w, rows) = up.stack(&[weight], RowOrder::Stacked)?;
                    let bias = match bias {
                        Some(t) => Some(up.vector_buffer(t)?),
                        None => None,
                    };
                    if l.lora.adapts(std::slice::from_ref(weight)) {
                        let parts = std::slice::from_ref(weight);
                        let (x, y) = ((b.get(ctx, *src)?, None), (b.get(ctx, *dst)?, rows));
                        let order = RowOrder::Stacked;
                        adapters = lora_launch(l, parts, order, x, y, &mut lora_bytes)?;
                    }
                    Step::Matmul(mm(MatmulArgs {
                        x: b.get(ctx, *src)?,
                        w: &w,
                        bias: bias.as_ref(),
                        y: b.get(ctx, *dst)?,
                        ldy: rows,
                        out_offset: 0,
                        norm: None,
                        // Into the residual stream a product adds (Granite's scaled first).
                        accumulate: *dst == Buf::Residual,
                        sample_rows: false,
                        map: match (*dst, c.residual_scale()) {
                            (Buf::Residual, s) if s != 1.0 => OutputMap::Scale(s),
                            _ => OutputMap::Identity,
                        },
                        pairs: None,
                    })?)
                }
                Op::AddNormed { src, norm } => Step::Launch(ops::residual_rmsnorm(
                    ctx,
                    l.kernels,
                    step,
                    (c.hidden_size, eps),
                    b.get(ctx, *src)?,
                    &up.gains(&[norm], RowOrder::Stacked)?,
                    &b.x,
                )),
                Op::LayerNorm { norm, bias, dst } => Step::Launch(ops::layer_norm(
                    ctx,
                    l.kernels,
                    step,
                    (c.hidden_size, eps),
                    &b.x,
                    &up.gains(&[norm], RowOrder::Stacked)?,
                    match bias {
                        Some(t) => Some(up.vector_buffer(t)?),
                        None => None,
                    }
                    .as_ref(),
                    b.get(ctx, *dst)?,
                )),
                Op::Activation => {
                    let act = b.get(ctx, Buf::Act)?;
                    let shape = (mlp_rows, c.activation);
                    Step::Launch(ops::ungated(ctx, l.kernels, step, shape, act)?)
                }
                Op::Experts(e) => {
                    steps.extend(experts::steps(l, &mut up, e, mlp_rows)?);
                    continue;
                }
                Op::GatedActivation => Step::Launch(ops::glu(
                    ctx,
                    l.kernels,
                    step,
                    (mlp_rows / 2, c.activation),
                    b.get(ctx, Buf::GateUp)?,
                    &b.act,
                )),
            });
            // The adapters' share of the product just pushed.
            if let Some((lora, order)) = adapters.take() {
                steps.push(Step::Lora(lora, order));
            }
        }
        // Norm gains and biases (the vectors) are stored as f32.
        let vectors: usize = (layer.tensors().iter())
            .filter(|t| t.shape.len() == 1)
            .map(|t| t.len())
            .sum();
        let bytes = vectors as u64 * 4 + up.matrix_bytes + lora_bytes;
        Ok((Layer { steps }, bytes))
    }

    /// The layer's operations, in order; the adapters' only when `lora` (some token of the
    /// step runs through one).
    pub fn stages(&self, lora: bool) -> impl Iterator<Item = &dyn Recorded> {
        self.steps.iter().filter_map(move |step| match step {
            Step::Matmul(m) => Some(m as &dyn Recorded),
            Step::Attention(a) => Some(a),
            Step::Launch(l) => Some(l),
            Step::Lora(a, _) => lora.then_some(a as &dyn Recorded),
        })
    }
}
