//! One decoder layer's launches, built once from its tensors: the QKV projection with the
//! input RMSNorm fused in, RoPE and the KV write, paged attention, the output projection, the
//! MLP (gate and up in one matrix, the gated activation, down), and for Gemma 3 the RMSNorms
//! on the attention's and the MLP's outputs as they join the residual stream.

use kiln_model::{LayerTensors, ModelConfig, Tensor, Weights};

use crate::ops::{self, AttentionBuffers, Matmul, MatmulArgs};
use crate::{GpuContext, GpuError, GpuMatrix, Kernels, KvCache, Launch, RunnerConfig, StepInputs};

/// The step's activations, shared by every layer.
pub(crate) struct Activations {
    /// The residual stream, (tokens, hidden).
    pub x: wgpu::Buffer,
    pub qkv: wgpu::Buffer,
    pub attn: wgpu::Buffer,
    pub gate_up: wgpu::Buffer,
    pub act: wgpu::Buffer,
    /// A sub-layer's output before its post-norm (Gemma 3 only).
    pub proj: Option<wgpu::Buffer>,
}

/// Uploads a stack of matrices (name, rows) of `cols` columns as one.
pub(crate) type UploadMatrix<'a> =
    dyn Fn(&str, &[(&str, usize)], usize) -> Result<GpuMatrix, GpuError> + 'a;

/// What every layer's build reads.
pub(crate) struct LayerContext<'a> {
    pub ctx: &'a GpuContext,
    pub kernels: &'a Kernels,
    pub config: &'a ModelConfig,
    pub rc: &'a RunnerConfig,
    pub inputs: &'a StepInputs,
    pub kv: &'a KvCache,
    pub bufs: &'a Activations,
    /// The rotary tables: the global one, and the sliding layers' own when their base differs.
    pub rope: (&'a wgpu::Buffer, Option<&'a wgpu::Buffer>),
    pub matrix: &'a UploadMatrix<'a>,
    pub weights: &'a Weights,
}

pub(crate) struct Layer {
    qkv: Matmul,
    rope_kv: Launch,
    attention: ops::Attention,
    o_proj: Matmul,
    post_attn: Option<Launch>,
    gate_up: Matmul,
    glu: Launch,
    down: Matmul,
    post_mlp: Option<Launch>,
}

/// Reads a norm gain (with the config's offset) and checks its shape.
pub(crate) fn gain(w: &Weights, c: &ModelConfig, t: &Tensor) -> Result<Vec<f32>, GpuError> {
    let got = w.shape(&t.name)?;
    if got != t.shape {
        return Err(GpuError::Shape {
            op: "load",
            detail: format!("{}: expected {:?}, file has {got:?}", t.name, t.shape),
        });
    }
    Ok(c.read_gain(w, &t.name)?)
}

impl Layer {
    /// Layer `i`'s launches and the bytes of its weights on the GPU.
    pub fn new(l: &LayerContext, i: usize, t: &LayerTensors) -> Result<(Layer, u64), GpuError> {
        let (ctx, c, b) = (l.ctx, l.config, l.bufs);
        let (h, nh, nkv, d, inter) = (
            c.hidden_size,
            c.num_heads,
            c.num_kv_heads,
            c.head_dim,
            c.intermediate_size,
        );
        let qkv_width = (nh + 2 * nkv) * d;
        let eps = c.rms_norm_eps;
        let gain_buffer = |t: &Tensor| -> Result<wgpu::Buffer, GpuError> {
            let g = gain(l.weights, c, t)?;
            Ok(ctx.storage_init(&t.name, bytemuck::cast_slice(&g)))
        };
        // A stack's tensors uploaded as one matrix, separate or fused alike.
        let stack = |label: &str, ts: Vec<&Tensor>| {
            let parts: Vec<(&str, usize)> =
                ts.iter().map(|t| (t.name.as_str(), t.shape[0])).collect();
            (l.matrix)(label, &parts, h)
        };
        let w_qkv = stack("qkv_proj", t.qkv.tensors())?;
        let attn_gain = gain_buffer(&t.attn_norm)?;
        let b_qkv = match &t.qkv_bias {
            Some(parts) => {
                let mut v = Vec::new();
                for p in parts {
                    v.extend(l.weights.read_f32(&p.name)?);
                }
                Some(ctx.storage_init("qkv_bias", bytemuck::cast_slice(&v)))
            }
            None => None,
        };
        let qk_gain = match &t.qk_norm {
            Some([q, k]) => {
                let mut g = gain(l.weights, c, q)?;
                g.extend(gain(l.weights, c, k)?);
                Some(ctx.storage_init("qk_norm", bytemuck::cast_slice(&g)))
            }
            None => None,
        };
        let w_o = (l.matrix)("o_proj", &[(&t.o.name, h)], nh * d)?;
        let w_gu = stack("gate_up_proj", t.gate_up.tensors())?;
        let mlp_gain = gain_buffer(&t.mlp_norm)?;
        let w_down = (l.matrix)("down_proj", &[(&t.down.name, h)], inter)?;
        let norm_floats = 2 * h
            + if t.qk_norm.is_some() { 2 * d } else { 0 }
            + if t.post_norms.is_some() { 2 * h } else { 0 };
        let bytes =
            w_qkv.bytes() + w_o.bytes() + w_gu.bytes() + w_down.bytes() + norm_floats as u64 * 4;

        let step = &l.inputs.step;
        let mm = |x, w, bias, y, ldy, norm, accumulate| {
            Matmul::new(
                ctx,
                l.kernels,
                step,
                MatmulArgs {
                    x,
                    w,
                    bias,
                    y,
                    ldy,
                    out_offset: 0,
                    norm,
                    accumulate,
                    sample_rows: false,
                },
            )
        };
        // With post-norms a sub-layer writes `proj`, which its norm adds to `x`; without, it
        // accumulates into `x` directly.
        let (post_attn, post_mlp, out, accumulate) = match (&t.post_norms, &b.proj) {
            (Some([pa, pm]), Some(proj)) => {
                let post = |t: &Tensor| -> Result<Launch, GpuError> {
                    Ok(ops::residual_rmsnorm(
                        ctx,
                        l.kernels,
                        step,
                        (h, eps),
                        proj,
                        &gain_buffer(t)?,
                        &b.x,
                    ))
                };
                (Some(post(pa)?), Some(post(pm)?), proj, false)
            }
            _ => (None, None, &b.x, true),
        };
        let window = c.layer_window(i);
        let rope = match (window, l.rope.1) {
            (Some(_), Some(local)) => local,
            _ => l.rope.0,
        };
        let (inputs, kv) = (l.inputs, l.kv);
        let layer = Layer {
            qkv: mm(
                &b.x,
                &w_qkv,
                b_qkv.as_ref(),
                &b.qkv,
                qkv_width as u32,
                Some((&attn_gain, eps)),
                false,
            ),
            rope_kv: ops::rope_kv(
                ctx,
                l.kernels,
                step,
                (nh, nkv, d),
                (l.rc.kv_dtype, l.rc.max_model_len),
                &inputs.positions,
                &inputs.slot_mapping,
                rope,
                &b.qkv,
                &kv.k[i],
                &kv.v[i],
                qk_gain.as_ref().map(|g| (g, eps)),
            ),
            attention: ops::attention(
                ctx,
                l.kernels,
                step,
                (nh, nkv, d),
                (window, c.attention_scale()),
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
                },
                ops::SPLIT_TOKENS.min(l.rc.max_tokens as u32),
            )?,
            o_proj: mm(&b.attn, &w_o, None, out, h as u32, None, accumulate),
            post_attn,
            gate_up: mm(
                &b.x,
                &w_gu,
                None,
                &b.gate_up,
                (2 * inter) as u32,
                Some((&mlp_gain, eps)),
                false,
            ),
            glu: ops::glu(
                ctx,
                l.kernels,
                step,
                (inter, c.activation),
                &b.gate_up,
                &b.act,
            ),
            down: mm(&b.act, &w_down, None, out, h as u32, None, accumulate),
            post_mlp,
        };
        Ok((layer, bytes))
    }

    /// Records the layer's dispatches; returns how many.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, t: u32, s: u32) -> u32 {
        let post = |l: &Option<Launch>, pass: &mut wgpu::ComputePass<'_>| {
            l.as_ref().map_or(0, |l| l.record(pass, t, s))
        };
        let mut n = self.qkv.record(pass, t, s)
            + self.rope_kv.record(pass, t, s)
            + self.attention.record(pass, t, s)
            + self.o_proj.record(pass, t, s);
        n += post(&self.post_attn, pass);
        n += self.gate_up.record(pass, t, s)
            + self.glu.record(pass, t, s)
            + self.down.record(pass, t, s);
        n + post(&self.post_mlp, pass)
    }
}
