//! The pieces of the layers whose norms are LayerNorms (Cohere, StableLM, Nemotron,
//! StarCoder2): a LayerNorm writes [`Normed`], which the next sub-layer's products read, and
//! each sub-layer adds its output to the residual stream.

use super::Buf::{Act, Attn, GateUp, Normed, Qkv, Residual};
use super::Op::{
    Activation, Attention, GatedActivation, LayerNorm, NormedProject, Project, Rotary,
};
use super::{Buf, Names, Op};

/// The LayerNorm `role` of the residual stream into [`Normed`], with its bias where `bias`.
pub(super) fn layer_norm(n: &Names, role: &str, bias: bool) -> Op {
    layer_norm_into(n, role, bias, Normed)
}

/// The LayerNorm `role` of the residual stream into `dst`, with its bias where `bias`.
pub(super) fn layer_norm_into(n: &Names, role: &str, bias: bool, dst: Buf) -> Op {
    LayerNorm {
        norm: n.norm(role),
        bias: bias.then(|| n.bias(role, n.cfg.hidden_size)),
        dst,
    }
}

/// Attention on [`Normed`] (q/k/v biases where the config has `attention_bias`, each head of
/// q and k LayerNorm'd where it has `qk_layer_norm`), its output projection (named `o`, with
/// its bias where `o_bias`) added to the residual stream.
pub(super) fn attention(n: &Names, o: &str, o_bias: bool) -> [Op; 4] {
    let c = n.cfg;
    let (h, q, d) = (c.hidden_size, c.num_heads * c.head_dim, c.head_dim);
    let qk_norm = (c.qk_layer_norm).then(|| {
        [("q", c.num_heads), ("k", c.num_kv_heads)]
            .map(|(p, heads)| n.tensor(&format!("self_attn.{p}_norm.weight"), &[heads, d]))
    });
    [
        NormedProject {
            src: Normed,
            norm: None,
            weights: n.qkv(),
            bias: c.attention_bias.then(|| n.qkv_bias()),
            dst: Qkv,
        },
        Rotary {
            qk_norm,
            norm_after: false,
        },
        Attention { sinks: None },
        Project {
            src: Attn,
            weight: n.tensor(&format!("{o}.weight"), &[h, q]),
            bias: o_bias.then(|| n.bias(o, h)),
            dst: Residual,
        },
    ]
}

/// The gated MLP on [`Normed`], added to the residual stream.
pub(super) fn gated_mlp(n: &Names) -> [Op; 3] {
    [
        NormedProject {
            src: Normed,
            norm: None,
            weights: n.gate_up(),
            bias: None,
            dst: GateUp,
        },
        GatedActivation,
        Project {
            src: Act,
            weight: n.down(),
            bias: None,
            dst: Residual,
        },
    ]
}

/// A MLP without a gate on [`Normed`]: `down(act(up x))` (the model's activation), the
/// products named `up` and `down` (with their biases where `biases`), added to the residual
/// stream.
pub(super) fn ungated_mlp(n: &Names, names: (&str, &str), biases: bool) -> [Op; 3] {
    ungated_mlp_on(n, Normed, names, biases)
}

/// [`ungated_mlp`] on `src` (a LayerNorm's output).
pub(super) fn ungated_mlp_on(
    n: &Names,
    src: Buf,
    (up, down): (&str, &str),
    biases: bool,
) -> [Op; 3] {
    let (h, ff) = (n.cfg.hidden_size, n.cfg.intermediate_size);
    [
        NormedProject {
            src,
            norm: None,
            weights: vec![n.tensor(&format!("{up}.weight"), &[ff, h])],
            bias: biases.then(|| vec![n.bias(up, ff)]),
            dst: Act,
        },
        Activation,
        Project {
            src: Act,
            weight: n.tensor(&format!("{down}.weight"), &[h, ff]),
            bias: biases.then(|| n.bias(down, h)),
            dst: Residual,
        },
    ]
}
