//! The step's activation buffers every layer's launches read and write, made once for the
//! runner: the residual stream, each operation's output, and a mixture of experts' routing.

use kiln_model::Buf;

use crate::ops;
use crate::{GpuContext, GpuError};

/// The step's activations, shared by every layer.
pub(crate) struct Activations {
    /// The residual stream, (tokens, hidden).
    pub x: wgpu::Buffer,
    pub qkv: wgpu::Buffer,
    pub attn: wgpu::Buffer,
    /// Gate and up side by side, allocated on first use: only a layer whose gated activation
    /// is not in the gate/up product's epilogue needs it.
    pub gate_up: std::cell::OnceCell<wgpu::Buffer>,
    /// Its size in bytes.
    pub gate_up_bytes: u64,
    pub act: wgpu::Buffer,
    /// A sub-layer's output before its norm; only when some layer writes [`Buf::Proj`].
    pub proj: Option<wgpu::Buffer>,
    /// The residual stream through a LayerNorm; only when some layer writes [`Buf::Normed`].
    pub normed: Option<wgpu::Buffer>,
    /// Split attention's runs, for every layer ([`ops::attention_runs_bytes`]).
    pub runs: wgpu::Buffer,
    /// The adapters' A x, for every stack ([`ops::LoraBuffers::t`]); only with adapters.
    pub lora_t: Option<wgpu::Buffer>,
    /// A mixture of experts' routing and activations; only for a model with experts.
    pub experts: Option<ExpertBuffers>,
}

/// What a mixture of experts' launches share across layers.
pub(crate) struct ExpertBuffers {
    /// The router's logits, (tokens, experts).
    pub logits: wgpu::Buffer,
    /// Each token's chosen experts and their weights, (tokens, experts a token).
    pub ids: wgpu::Buffer,
    pub weights: wgpu::Buffer,
    /// Each token's chosen experts' gated activations, (tokens x experts a token,
    /// intermediate).
    pub act: wgpu::Buffer,
    /// The step's tokens listed by expert, where the grouped product runs (steps of many
    /// tokens on adapters with subgroups of at least 8).
    pub groups: Option<ops::ExpertGroups>,
}

impl Activations {
    pub(super) fn get(&self, ctx: &GpuContext, b: Buf) -> Result<&wgpu::Buffer, GpuError> {
        Ok(match b {
            Buf::Residual => &self.x,
            Buf::Qkv => &self.qkv,
            Buf::Attn => &self.attn,
            Buf::GateUp => {
                (self.gate_up).get_or_init(|| ctx.storage("gate_up", self.gate_up_bytes))
            }
            Buf::Act => &self.act,
            Buf::Proj => self.proj.as_ref().ok_or_else(|| GpuError::Shape {
                op: "layer",
                detail: "an operation uses the projection buffer, which was not allocated".into(),
            })?,
            Buf::Normed => self.normed.as_ref().ok_or_else(|| GpuError::Shape {
                op: "layer",
                detail: "an operation uses the LayerNorm's buffer, which was not allocated".into(),
            })?,
        })
    }
}
