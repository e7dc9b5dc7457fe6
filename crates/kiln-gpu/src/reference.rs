//! A plain CPU forward pass, the yardstick the GPU kernels and the whole model are tested
//! against. Dense causal attention over one sequence, f32 storage with f64 accumulation,
//! weights as the GPU stores them
//! (quantized types dequantized exactly, the others rounded through f16). Slow by design; only for tests.

mod activation;
mod experts;
mod scores;

pub use activation::{activation, erf, gated};
pub use experts::route;
pub use scores::{alibi_slope, soft_cap};

use half::f16;
use kiln_model::{Buf, ModelConfig, ModelError, ModelTensors, Op, Tensor, Weights};

use crate::KvDtype;

/// One operation of a layer with its weights read ([`Op`]'s counterpart).
enum Step {
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
struct Rows {
    residual: Vec<Vec<f32>>,
    qkv: Vec<Vec<f32>>,
    attn: Vec<Vec<f32>>,
    gate_up: Vec<Vec<f32>>,
    act: Vec<Vec<f32>>,
    proj: Vec<Vec<f32>>,
    normed: Vec<Vec<f32>>,
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

pub struct CpuModel {
    pub config: ModelConfig,
    embed: Vec<f32>,
    /// The learned position embedding, a row a position (GPT-2's).
    positions: Option<Vec<f32>>,
    /// The embeddings' LayerNorm, gain and bias (BLOOM's).
    embed_norm: Option<[Vec<f32>; 2]>,
    layers: Vec<Vec<Step>>,
    norm: Vec<f32>,
    norm_bias: Option<Vec<f32>>,
    lm_head: Vec<f32>,
    lm_head_bias: Option<Vec<f32>>,
    /// The cache type whose rounding attention reads K and V through (exact when `None`).
    kv: Option<KvDtype>,
}

fn f16_round(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| f16::from_f32(x).to_f32()).collect()
}

/// `y = W x` for `W` of shape `(rows, x.len())`.
pub fn matvec(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks(x.len())
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

pub fn rmsnorm(x: &[f32], gain: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps as f64).sqrt();
    x.iter()
        .zip(gain)
        .map(|(v, g)| (*v as f64 * inv) as f32 * g)
        .collect()
}

/// `(x - mean(x)) / sqrt(var(x) + eps) * gain`: a LayerNorm without a bias (Cohere's); see
/// [`layernorm_bias`].
pub fn layernorm(x: &[f32], gain: &[f32], eps: f32) -> Vec<f32> {
    let n = x.len() as f64;
    let mean = x.iter().map(|v| *v as f64).sum::<f64>() / n;
    let var = x.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n;
    let inv = 1.0 / (var + eps as f64).sqrt();
    x.iter()
        .zip(gain)
        .map(|(v, g)| ((*v as f64 - mean) * inv) as f32 * g)
        .collect()
}

/// A LayerNorm plus `bias` where there is one (StableLM's).
pub fn layernorm_bias(x: &[f32], gain: &[f32], bias: Option<&[f32]>, eps: f32) -> Vec<f32> {
    let mut y = layernorm(x, gain, eps);
    if let Some(b) = bias {
        y.iter_mut().zip(b).for_each(|(y, b)| *y += b);
    }
    y
}

/// Rotates one head in place (HF rotate_half layout), in f64, with cos and sin multiplied by
/// `scale` (LongRoPE's attention factor; 1 otherwise).
pub fn rope(head: &mut [f32], pos: usize, inv_freq: &[f64], scale: f64) {
    let half = head.len() / 2;
    for i in 0..half {
        let (s, c) = (pos as f64 * inv_freq[i]).sin_cos();
        let (s, c) = (s * scale, c * scale);
        let (x1, x2) = (head[i] as f64, head[i + half] as f64);
        head[i] = (x1 * c - x2 * s) as f32;
        head[i + half] = (x2 * c + x1 * s) as f32;
    }
}

impl CpuModel {
    pub fn load(config: &ModelConfig, w: &Weights) -> Result<Self, ModelError> {
        // As the GPU holds them: kept-quantized types exactly, everything else through f16.
        let get = |n: &str| {
            let v = w.read_f32(n)?;
            Ok::<_, ModelError>(
                if crate::WeightFormat::for_dtype(w.dtype(n)?) == crate::WeightFormat::F16 {
                    f16_round(v)
                } else {
                    v
                },
            )
        };
        let tensors = ModelTensors::for_config(config);
        let read = |t: &Tensor| w.read_f32(&t.name);
        let norm = |t: &Tensor| config.read_gain(w, &t.name);
        let mut layers = Vec::new();
        for layer in &tensors.layers {
            let mut steps = Vec::new();
            for op in &layer.ops {
                steps.push(match op {
                    Op::NormedProject {
                        src,
                        norm: n,
                        weights,
                        bias,
                        dst,
                    } => {
                        // A stack (q, k, v; gate, up) read whole, fused or not.
                        let mut w = Vec::new();
                        for t in weights {
                            w.extend(get(&t.name)?);
                        }
                        let bias = match bias {
                            Some(parts) => {
                                let mut b = Vec::new();
                                for t in parts {
                                    b.extend(read(t)?);
                                }
                                Some(b)
                            }
                            None => None,
                        };
                        Step::NormedProject {
                            src: *src,
                            norm: n.as_ref().map(norm).transpose()?,
                            w,
                            bias,
                            dst: *dst,
                        }
                    }
                    Op::Rotary {
                        qk_norm,
                        norm_after,
                    } => Step::Rotary {
                        qk_norm: match qk_norm {
                            Some([q, k]) => Some((norm(q)?, norm(k)?)),
                            None => None,
                        },
                        norm_after: *norm_after,
                    },
                    Op::Attention { sinks } => Step::Attention {
                        sinks: sinks.as_ref().map(read).transpose()?,
                    },
                    Op::Project {
                        src,
                        weight,
                        bias,
                        dst,
                    } => Step::Project {
                        src: *src,
                        w: get(&weight.name)?,
                        bias: bias.as_ref().map(read).transpose()?,
                        dst: *dst,
                    },
                    Op::AddNormed { src, norm: n } => Step::AddNormed {
                        src: *src,
                        norm: norm(n)?,
                    },
                    Op::LayerNorm { norm: n, bias, dst } => Step::LayerNorm {
                        norm: norm(n)?,
                        bias: bias.as_ref().map(read).transpose()?,
                        dst: *dst,
                    },
                    Op::GatedActivation => Step::GatedActivation,
                    Op::Activation => Step::Activation,
                    Op::Experts(e) => {
                        let all = |ts: &[Tensor]| -> Result<Vec<f32>, ModelError> {
                            let mut v = Vec::new();
                            for t in ts {
                                v.extend(get(&t.name)?);
                            }
                            Ok(v)
                        };
                        let opt = |t: &Option<Tensor>| t.as_ref().map(|t| get(&t.name)).transpose();
                        let biases = |ts: &Option<Vec<Tensor>>| -> Result<_, ModelError> {
                            let Some(ts) = ts else { return Ok(None) };
                            let mut v = Vec::new();
                            for t in ts {
                                v.extend(read(t)?);
                            }
                            Ok(Some(v))
                        };
                        Step::Experts(experts::Experts {
                            moe: config.moe.expect("a layer with experts has a MoE config"),
                            norm: norm(&e.norm)?,
                            router: get(&e.router.name)?,
                            router_bias: e.router_bias.as_ref().map(read).transpose()?,
                            choice_bias: opt(&e.choice_bias)?,
                            shared_gate: opt(&e.shared_gate)?,
                            gate_up: all(&e.gate_up)?,
                            down: all(&e.down)?,
                            gate_up_bias: biases(&e.gate_up_bias)?,
                            down_bias: biases(&e.down_bias)?,
                        })
                    }
                });
            }
            layers.push(steps);
        }
        let embed = get(&tensors.embed.name)?;
        let lm_head = match tensors.lm_head.as_ref().filter(|t| w.contains(&t.name)) {
            Some(t) => get(&t.name)?,
            None => embed.clone(),
        };
        Ok(Self {
            config: config.clone(),
            embed,
            positions: tensors.positions.as_ref().map(read).transpose()?,
            embed_norm: match &tensors.embed_norm {
                Some([g, b]) => Some([read(g)?, read(b)?]),
                None => None,
            },
            layers,
            norm: norm(&tensors.final_norm)?,
            norm_bias: tensors.final_norm_bias.as_ref().map(read).transpose()?,
            lm_head,
            lm_head_bias: tensors.lm_head_bias.as_ref().map(read).transpose()?,
            kv: None,
        })
    }

    /// The same model with attention reading K and V as a cache of `dtype` holds them (each
    /// value rounded through its encoding), as the GPU's attention does.
    pub fn with_kv_cache(self, dtype: KvDtype) -> Self {
        Self {
            kv: Some(dtype),
            ..self
        }
    }

    /// Logits at every position of `tokens`.
    pub fn forward(&self, tokens: &[u32]) -> Vec<Vec<f32>> {
        let c = &self.config;
        let (h, eps) = (c.hidden_size, c.rms_norm_eps);
        let scale = c.embed_scale();
        let mut rows = Rows {
            residual: (tokens.iter().enumerate())
                .map(|(pos, &t)| {
                    let row = &self.embed[t as usize * h..(t as usize + 1) * h];
                    let mut x: Vec<f32> = row.iter().map(|v| v * scale).collect();
                    if let Some(p) = &self.positions {
                        x.iter_mut()
                            .zip(&p[pos * h..][..h])
                            .for_each(|(x, p)| *x += p);
                    }
                    match &self.embed_norm {
                        Some([g, b]) => layernorm_bias(&x, g, Some(b), eps),
                        None => x,
                    }
                })
                .collect(),
            ..Rows::default()
        };
        for (i, steps) in self.layers.iter().enumerate() {
            for step in steps {
                self.run(i, step, &mut rows);
            }
        }
        (rows.residual.iter())
            .map(|x| {
                let normed = match c.architecture.layer_norm() {
                    true => layernorm_bias(x, &self.norm, self.norm_bias.as_deref(), eps),
                    false => rmsnorm(x, &self.norm, eps),
                };
                let mut logits = matvec(&self.lm_head, &normed);
                if let Some(b) = &self.lm_head_bias {
                    logits.iter_mut().zip(b).for_each(|(l, b)| *l += b);
                }
                logits.iter_mut().for_each(|l| *l /= c.logits_divisor());
                match c.final_softcap {
                    Some(cap) => (logits.iter())
                        .map(|&l| soft_cap(l as f64, cap) as f32)
                        .collect(),
                    None => logits,
                }
            })
            .collect()
    }

    /// One operation of layer `i` over every position.
    fn run(&self, i: usize, step: &Step, rows: &mut Rows) {
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

    /// Causal attention of every position's query over the keys and values up to it (within
    /// layer `i`'s window), each head's softmax with its sink logit where there are `sinks`.
    fn attention(&self, i: usize, qkv: &[Vec<f32>], sinks: Option<&[f32]>) -> Vec<Vec<f32>> {
        let c = &self.config;
        let (nh, nkv, d) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let window = c.layer_window(i);
        let held: Vec<Vec<f32>> = match self.kv {
            Some(dtype) => (qkv.iter())
                .map(|row| {
                    // K rounded in the order the cache holds it (the rotary pair layout),
                    // which decides q8_0's groups.
                    let k = &row[nh * d..(nh + nkv) * d];
                    let paired = |r| crate::ops::paired_row(r, d, c.rotary_dim());
                    let stored: Vec<f32> = (0..k.len()).map(|r| k[paired(r)]).collect();
                    let mut held = dtype.round(&[&stored[..], &row[(nh + nkv) * d..]].concat());
                    let mut k_held = vec![0f32; k.len()];
                    for (r, v) in held[..k.len()].iter().enumerate() {
                        k_held[paired(r)] = *v;
                    }
                    held[..k.len()].copy_from_slice(&k_held);
                    held
                })
                .collect(),
            None => qkv.iter().map(|row| row[nh * d..].to_vec()).collect(),
        };
        let k_at = |j: usize, kvh: usize| &held[j][kvh * d..(kvh + 1) * d];
        let v_at = |j: usize, kvh: usize| &held[j][(nkv + kvh) * d..(nkv + kvh + 1) * d];
        (0..qkv.len())
            .map(|pos| {
                let mut attn = vec![0f32; nh * d];
                for head in 0..nh {
                    let kvh = head / (nh / nkv);
                    let q = &qkv[pos][head * d..(head + 1) * d];
                    let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                    let slope = c.alibi.map_or(0.0, |max| alibi_slope(head, nh, max));
                    let scores: Vec<f64> = (first..=pos)
                        .map(|j| {
                            let s = q
                                .iter()
                                .zip(k_at(j, kvh))
                                .map(|(a, b)| *a as f64 * *b as f64)
                                .sum::<f64>()
                                * c.attention_scale() as f64;
                            let s = c.attn_softcap.map_or(s, |cap| soft_cap(s, cap));
                            s - slope * (pos - j) as f64
                        })
                        .collect();
                    let sink = sinks.map(|s| s[head] as f64);
                    let m = (scores.iter().chain(&sink)).fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                    let z: f64 = e.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - m).exp());
                    for x in 0..d {
                        attn[head * d + x] = (first..=pos)
                            .map(|j| e[j - first] / z * v_at(j, kvh)[x] as f64)
                            .sum::<f64>() as f32;
                    }
                }
                attn
            })
            .collect()
    }
}
