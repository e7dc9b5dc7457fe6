//! A decoder layer as its architecture writes it: the operations in the order they run, each
//! naming the tensors it reads and the activations it reads and writes. The GPU runner turns
//! each operation into its launch and the CPU reference into its loop, so an architecture's
//! order of operations is written once, in its file.

use super::Tensor;

/// A step's activations, one row per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// The residual stream (hidden size).
    Residual,
    /// q, k and v, in that order (query heads, then KV heads, times head_dim).
    Qkv,
    /// The attention's output (query heads times head_dim).
    Attn,
    /// Gate and up, in that order (twice the intermediate size).
    GateUp,
    /// The gated activation (intermediate size).
    Act,
    /// A sub-layer's output on its way through a norm into the residual stream (hidden size).
    Proj,
    /// The residual stream through a LayerNorm (hidden size): what both of Cohere's sub-layers
    /// read.
    Normed,
}

/// One operation of a decoder layer.
#[derive(Debug, Clone)]
pub enum Op {
    /// `dst = W · (rmsnorm(src) * norm) + bias`: `src` (the residual stream, or
    /// [`Buf::Normed`]) RMS-normalized (as it is without `norm`: OLMo 2's sub-layers read the
    /// residual stream unnormalized, Cohere's its LayerNorm), then multiplied by matrices
    /// stacked by rows (q, k and v; gate and up), stored as separate tensors or as one fused
    /// tensor; the bias, if any, stacked the same way.
    NormedProject {
        src: Buf,
        norm: Option<Tensor>,
        weights: Vec<Tensor>,
        bias: Option<Vec<Tensor>>,
        dst: Buf,
    },
    /// On [`Buf::Qkv`]: q and k RMS-normalized with their gains if `qk_norm` is given (each
    /// head, where the gains are `head_dim` wide: Qwen3, Gemma 3; all of q and all of k, where
    /// they are as wide as q and k: OLMo 2; each head LayerNorm'd with a gain of its own,
    /// `[heads, head_dim]`, where the config has `qk_layer_norm`: Command-R+), then both
    /// rotated by their position (the layer's RoPE base); or, with `norm_after`, rotated
    /// first and each head normalized after (Hunyuan's); k and v written to the layer's KV
    /// cache.
    Rotary {
        qk_norm: Option<[Tensor; 2]>,
        norm_after: bool,
    },
    /// Causal attention of [`Buf::Qkv`]'s queries over the cached keys and values (within the
    /// layer's window, scaled by the model's attention scale), into [`Buf::Attn`]; with
    /// `sinks` (gpt-oss's, one per query head), each head's softmax has one more logit, its
    /// sink, which weighs no value.
    Attention { sinks: Option<Tensor> },
    /// `dst = W · src + bias`; into [`Buf::Residual`] the product is added.
    Project {
        src: Buf,
        weight: Tensor,
        bias: Option<Tensor>,
        dst: Buf,
    },
    /// `x += rmsnorm(src) * norm`: a sub-layer's output normalized into the residual stream.
    AddNormed { src: Buf, norm: Tensor },
    /// `dst` = `(x - mean(x)) / sqrt(var(x) + eps) * norm + bias`: the residual stream
    /// through a LayerNorm (Cohere's has no bias, StableLM's has), into [`Buf::Normed`], or
    /// into [`Buf::Proj`] where a second LayerNorm of the same stream is read beside the
    /// first (GPT-NeoX's MLP beside its attention).
    LayerNorm {
        norm: Tensor,
        bias: Option<Tensor>,
        dst: Buf,
    },
    /// [`Buf::Act`] = activation(gate) * up, from [`Buf::GateUp`] (the model's activation).
    GatedActivation,
    /// [`Buf::Act`] = activation([`Buf::Act`]) in place: a MLP without a gate.
    Activation,
    /// A mixture of experts' routed experts, added into the residual stream ([`Experts`]).
    Experts(Box<Experts>),
}

/// A mixture of experts ([`crate::Moe`]) on the residual stream normalized with gain `norm`:
/// the router's logits (`router`, a row an expert), then each token's chosen experts' gated
/// MLPs (`gate_up`: every expert's gate, then every expert's up; `down`: every expert's),
/// their outputs weighted by the router and added into the residual stream.
///
/// A shared expert is a gated MLP of its own, written as the operations around this one: its
/// gate/up product and activation into [`Buf::Act`] before, its down product into the
/// residual stream after (this operation reads the stream before either adds to it). Where
/// it is gated, this operation scales [`Buf::Act`] by its gate.
#[derive(Debug, Clone)]
pub struct Experts {
    pub norm: Tensor,
    pub router: Tensor,
    /// With [`crate::Scoring::Sigmoid`]: each expert's bias in the choice.
    pub choice_bias: Option<Tensor>,
    /// A gated shared expert's gate: one row, whose product with the normalized input, through
    /// a sigmoid, scales the shared expert's activations in [`Buf::Act`].
    pub shared_gate: Option<Tensor>,
    /// A bias on the router's logits (gpt-oss's).
    pub router_bias: Option<Tensor>,
    pub gate_up: Vec<Tensor>,
    pub down: Vec<Tensor>,
    /// Each expert's biases on its gate/up and down products (gpt-oss's), ordered as the
    /// matrices are.
    pub gate_up_bias: Option<Vec<Tensor>>,
    pub down_bias: Option<Vec<Tensor>>,
}

impl Op {
    /// The tensors the operation reads.
    pub fn tensors(&self) -> Vec<&Tensor> {
        match self {
            Op::NormedProject {
                norm,
                weights,
                bias,
                ..
            } => {
                let mut v: Vec<&Tensor> = norm.iter().collect();
                v.extend(weights);
                v.extend(bias.iter().flatten());
                v
            }
            Op::Rotary { qk_norm, .. } => qk_norm.iter().flatten().collect(),
            Op::Project { weight, bias, .. } => [weight].into_iter().chain(bias).collect(),
            Op::AddNormed { norm, .. } => vec![norm],
            Op::LayerNorm { norm, bias, .. } => [norm].into_iter().chain(bias).collect(),
            Op::Attention { sinks } => sinks.iter().collect(),
            Op::GatedActivation | Op::Activation => Vec::new(),
            Op::Experts(e) => [&e.norm, &e.router]
                .into_iter()
                .chain(&e.choice_bias)
                .chain(&e.shared_gate)
                .chain(&e.router_bias)
                .chain(&e.gate_up)
                .chain(&e.down)
                .chain(e.gate_up_bias.iter().flatten())
                .chain(e.down_bias.iter().flatten())
                .collect(),
        }
    }

    /// The matrices the operation multiplies by (a projection's, stacked or one), if any.
    pub fn matrices(&self) -> &[Tensor] {
        match self {
            Op::NormedProject { weights, .. } => weights,
            Op::Project { weight, .. } => std::slice::from_ref(weight),
            _ => &[],
        }
    }

    /// Whether the operation reads or writes `buf`.
    pub fn uses(&self, buf: Buf) -> bool {
        match self {
            Op::NormedProject { src, dst, .. } => buf == *src || buf == *dst,
            Op::LayerNorm { dst, .. } => buf == Buf::Residual || buf == *dst,
            Op::Rotary { .. } => buf == Buf::Qkv,
            Op::Attention { .. } => buf == Buf::Qkv || buf == Buf::Attn,
            Op::Project { src, dst, .. } => buf == *src || buf == *dst,
            Op::AddNormed { src, .. } => buf == Buf::Residual || buf == *src,
            Op::GatedActivation => buf == Buf::GateUp || buf == Buf::Act,
            Op::Activation => buf == Buf::Act,
            Op::Experts(e) => buf == Buf::Residual || (buf == Buf::Act && e.shared_gate.is_some()),
        }
    }
}

/// One decoder layer: its operations, in order.
#[derive(Debug, Clone)]
pub struct Layer {
    pub ops: Vec<Op>,
}

impl Layer {
    /// Every tensor of the layer, once (a norm may feed two operations: a shared expert's
    /// and the routed experts'), in the order its operations read them.
    pub fn tensors(&self) -> Vec<&Tensor> {
        let mut seen = std::collections::HashSet::new();
        (self.ops.iter().flat_map(Op::tensors))
            .filter(|t| seen.insert(t.name.as_str()))
            .collect()
    }
}
