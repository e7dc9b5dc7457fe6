//! One operation of a layer with its weights read ([`Step`]), each position's row of every
//! activation ([`Rows`]), and an operation's run over all of them.

use kiln_model::Buf;

use super::{
    CpuModel, activation, experts, gated, layernorm, layernorm_bias, matvec, rmsnorm, rope,
};

/// One operation of a layer with its weights read ([`Op`](kiln_model::Op)'s counterpart).
pub(super) enum Step {
    NormedProject {
        src: Buf,
        norm: Option<Vec<f32>>,
        w: Vec<f32>,
        bias: Option<Vec<f32>>,
        dst: Buf,
    },
    Rotary {
        qk_norm: Option<(Vec<f32>, Vec<f32>)>,
        norm_after: bool,
    },
    Attention {
        sinks: Option<Vec<f32>>,
    },
    Project {
        src: Buf,
        w: Vec<f32>,
        bias: Option<Vec<f32>>,
        dst: Buf,
    },
    AddNormed {
        src: Buf,
        norm: Vec<f32>,
    },
    LayerNorm {
        norm: Vec<f32>,
        bias: Option<Vec<f32>>,
        dst: Buf,
    },
    GatedActivation,
    Activation,
    Experts(experts::Experts),
}

/// Each position's row of every activation.
#[derive(Default)]
pub(super) struct Rows {
    pub(super) residual: Vec<Vec<f32>>,
    pub(super) qkv: Vec<Vec<f32>>,
    pub(super) attn: Vec<Vec<f32>>,
    pub(super) gate_up: Vec<Vec<f32>>,
    pub(super) act: Vec<Vec<f32>>,
    pub(super) proj: Vec<Vec<f32>>,
    pub(super) normed: Vec<Vec<f32>>,
}

impl Rows {
    fn get(&mut self, b: Buf) -> &mut Vec<Vec<f32>> {
        match b {
            Buf::Residual => &mut self.residual,
            Buf::Qkv => &mut self.qkv,
            Buf::Attn => &mut self.attn,
            Buf::GateUp => &mut self.gate_up,
            Buf::Act => &mut self.act,
            Buf::Proj => &mut self.proj,
            Buf::Normed => &mut self.normed,
        }
    }
}

impl CpuModel {
    /// One operation of layer `i` over every position.
    pub(super) fn run(&self, i: usize, step: &Step, rows: &mut Rows) {
        let c = &self.config;
        let eps = c.rms_norm_eps;
        match step {
            Step::NormedProject {
                src,
                norm,
                w,
                bias,
                dst,
            } => {
                let out: Vec<Vec<f32>> = (rows.get(*src).iter())
                    .map(|x| {
                        let mut y = match norm {
                            Some(g) => matvec(w, &rmsnorm(x, g, eps)),
                            None => matvec(w, x),
                        };
                        if let Some(b) = bias {
                            y.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                        }
                        y
                    })
                    .collect();
                *rows.get(*dst) = out;
            }
            Step::Rotary {
                qk_norm,
                norm_after,
            } => {
                let (nh, nkv, d) = (c.num_heads, c.num_kv_heads, c.head_dim);
                // The first `rot` dimensions of each head turn (all but with a partial rotary
                // embedding), on every layer but SmolLM3's without RoPE.
                let r = c.layer_rope(i);
                let rot = 2 * r.inv_freq.len();
                let (inv_freq, factor) = (&r.inv_freq[..], r.attention_factor);
                for (pos, qkv) in rows.qkv.iter_mut().enumerate() {
                    let (q, k) = qkv[..(nh + nkv) * d].split_at_mut(nh * d);
                    // Over each head, or (OLMo 2) over all of q and all of k: as wide as
                    // the gains; or (Command-R+) each head LayerNorm'd with its own gain.
                    let normalize = |q: &mut [f32], k: &mut [f32]| {
                        let Some((qn, kn)) = qk_norm else { return };
                        for (x, g) in [(q, qn), (k, kn)] {
                            if c.qk_layer_norm {
                                for (hd, g) in x.chunks_mut(d).zip(g.chunks(d)) {
                                    hd.copy_from_slice(&layernorm(hd, g, eps));
                                }
                            } else {
                                for hd in x.chunks_mut(g.len()) {
                                    hd.copy_from_slice(&rmsnorm(hd, g, eps));
                                }
                            }
                        }
                    };
                    if !norm_after {
                        normalize(q, k);
                    }
                    q.chunks_mut(d)
                        .chain(k.chunks_mut(d))
                        .for_each(|hd| rope(&mut hd[..rot], pos, inv_freq, factor));
                    if *norm_after {
                        normalize(q, k);
                    }
                }
            }
            Step::Attention { sinks } => rows.attn = self.attention(i, &rows.qkv, sinks.as_deref()),
            Step::Project { src, w, bias, dst } => {
                let out: Vec<Vec<f32>> = (rows.get(*src).iter())
                    .map(|x| {
                        let mut y = matvec(w, x);
                        if let Some(b) = bias {
                            y.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                        }
                        y
                    })
                    .collect();
                if *dst == Buf::Residual {
                    let m = c.residual_scale();
                    for (x, o) in rows.residual.iter_mut().zip(out) {
                        x.iter_mut().zip(o).for_each(|(a, b)| *a += b * m);
                    }
                } else {
                    *rows.get(*dst) = out;
                }
            }
            Step::AddNormed { src, norm } => {
                let out: Vec<Vec<f32>> = (rows.get(*src).iter())
                    .map(|y| rmsnorm(y, norm, eps))
                    .collect();
                for (x, o) in rows.residual.iter_mut().zip(out) {
                    x.iter_mut().zip(o).for_each(|(a, b)| *a += b);
                }
            }
            Step::LayerNorm { norm, bias, dst } => {
                *rows.get(*dst) = (rows.residual.iter())
                    .map(|x| layernorm_bias(x, norm, bias.as_deref(), eps))
                    .collect();
            }
            Step::Experts(experts) => {
                // (Into the residual stream scaled as any sub-layer's output: Granite's.)
                let m = c.residual_scale();
                for (t, x) in rows.residual.iter_mut().enumerate() {
                    let (y, gate) = experts.forward(x, eps, c.activation);
                    if let Some(g) = gate {
                        rows.act[t].iter_mut().for_each(|a| *a *= g);
                    }
                    x.iter_mut().zip(y).for_each(|(a, b)| *a += b * m);
                }
            }
            Step::Activation => {
                for row in rows.act.iter_mut() {
                    row.iter_mut()
                        .for_each(|v| *v = activation(c.activation, *v as f64) as f32);
                }
            }
            Step::GatedActivation => {
                rows.act = (rows.gate_up.iter())
                    .map(|gu| {
                        let (g, u) = gu.split_at(gu.len() / 2);
                        (g.iter().zip(u))
                            .map(|(&g, &u)| gated(c.activation, g as f64, u as f64) as f32)
                            .collect()
                    })
                    .collect();
            }
        }
    }
}
