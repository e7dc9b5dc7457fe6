//! A plain CPU forward pass, the yardstick the GPU kernels and the whole model are tested
//! against. Dense causal attention over one sequence, f32 storage with f64 accumulation,
//! weights as the GPU stores them
//! (quantized types dequantized exactly, the others rounded through f16). Slow by design; only for tests.

use half::f16;
use kiln_model::{Activation, ModelConfig, ModelError, ModelTensors, Tensor, Weights};

struct Layer {
    attn_norm: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    bias: Option<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    /// Qwen3, Gemma 3: the per-head q and k norm gains.
    qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    /// Gemma 3: the norms on the attention's and the MLP's outputs.
    post_norms: Option<(Vec<f32>, Vec<f32>)>,
    o: Vec<f32>,
    mlp_norm: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

pub struct CpuModel {
    pub config: ModelConfig,
    embed: Vec<f32>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    lm_head: Vec<f32>,
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

/// The MLP's gate activation, in f64.
pub fn activation(act: Activation, g: f64) -> f64 {
    match act {
        Activation::Silu => g / (1.0 + (-g).exp()),
        Activation::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
        }
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
        for t in &tensors.layers {
            let bias = match &t.qkv_bias {
                Some([q, k, v]) => Some((read(q)?, read(k)?, read(v)?)),
                None => None,
            };
            let qk_norm = match &t.qk_norm {
                Some([q, k]) => Some((norm(q)?, norm(k)?)),
                None => None,
            };
            let post_norms = match &t.post_norms {
                Some([a, m]) => Some((norm(a)?, norm(m)?)),
                None => None,
            };
            // Stacks (q, k, v; gate, up) read whole and split by rows, fused or not.
            let stack = |ts: Vec<&Tensor>| -> Result<Vec<f32>, ModelError> {
                let mut all = Vec::new();
                for t in ts {
                    all.extend(get(&t.name)?);
                }
                Ok(all)
            };
            let (h, d) = (config.hidden_size, config.head_dim);
            let mut qkv = stack(t.qkv.tensors())?;
            let v = qkv.split_off((config.num_heads + config.num_kv_heads) * d * h);
            let k = qkv.split_off(config.num_heads * d * h);
            let q = qkv;
            let mut gate = stack(t.gate_up.tensors())?;
            let up = gate.split_off(config.intermediate_size * h);
            layers.push(Layer {
                qk_norm,
                post_norms,
                attn_norm: norm(&t.attn_norm)?,
                q,
                k,
                v,
                bias,
                o: get(&t.o.name)?,
                mlp_norm: norm(&t.mlp_norm)?,
                gate,
                up,
                down: get(&t.down.name)?,
            });
        }
        let embed = get(&tensors.embed.name)?;
        let lm_head = match tensors.lm_head.as_ref().filter(|t| w.contains(&t.name)) {
            Some(t) => get(&t.name)?,
            None => embed.clone(),
        };
        Ok(Self {
            config: config.clone(),
            embed,
            layers,
            norm: norm(&tensors.final_norm)?,
            lm_head,
        })
    }

    /// Logits at every position of `tokens`.
    pub fn forward(&self, tokens: &[u32]) -> Vec<Vec<f32>> {
        let c = &self.config;
        let (h, nh, nkv, d) = (c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim);
        let scale = c.embed_scale();
        let mut xs: Vec<Vec<f32>> = tokens
            .iter()
            .map(|&t| {
                let row = &self.embed[t as usize * h..(t as usize + 1) * h];
                row.iter().map(|v| v * scale).collect()
            })
            .collect();
        for (i, l) in self.layers.iter().enumerate() {
            let inv_freq = c.layer_rope_inv_freq(i);
            let window = c.layer_window(i);
            let mut ks = Vec::new();
            let mut vs = Vec::new();
            let mut qs = Vec::new();
            for (pos, x) in xs.iter().enumerate() {
                let n = rmsnorm(x, &l.attn_norm, c.rms_norm_eps);
                let (mut q, mut k, mut v) = (matvec(&l.q, &n), matvec(&l.k, &n), matvec(&l.v, &n));
                if let Some((bq, bk, bv)) = &l.bias {
                    q.iter_mut().zip(bq).for_each(|(a, b)| *a += b);
                    k.iter_mut().zip(bk).for_each(|(a, b)| *a += b);
                    v.iter_mut().zip(bv).for_each(|(a, b)| *a += b);
                }
                if let Some((qn, kn)) = &l.qk_norm {
                    q.chunks_mut(d)
                        .for_each(|hd| hd.copy_from_slice(&rmsnorm(hd, qn, c.rms_norm_eps)));
                    k.chunks_mut(d)
                        .for_each(|hd| hd.copy_from_slice(&rmsnorm(hd, kn, c.rms_norm_eps)));
                }
                let m = c.rope_attention_factor();
                q.chunks_mut(d).for_each(|hd| rope(hd, pos, &inv_freq, m));
                k.chunks_mut(d).for_each(|hd| rope(hd, pos, &inv_freq, m));
                qs.push(q);
                ks.push(k);
                vs.push(v);
            }
            for (pos, x) in xs.iter_mut().enumerate() {
                let mut attn = vec![0f32; nh * d];
                for head in 0..nh {
                    let kvh = head / (nh / nkv);
                    let q = &qs[pos][head * d..(head + 1) * d];
                    let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
                    let scores: Vec<f64> = (first..=pos)
                        .map(|j| {
                            let k = &ks[j][kvh * d..(kvh + 1) * d];
                            q.iter()
                                .zip(k)
                                .map(|(a, b)| *a as f64 * *b as f64)
                                .sum::<f64>()
                                * c.attention_scale() as f64
                        })
                        .collect();
                    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for i in 0..d {
                        attn[head * d + i] = (first..=pos)
                            .map(|j| e[j - first] / z * vs[j][kvh * d + i] as f64)
                            .sum::<f64>() as f32;
                    }
                }
                let mut o = matvec(&l.o, &attn);
                if let Some((post, _)) = &l.post_norms {
                    o = rmsnorm(&o, post, c.rms_norm_eps);
                }
                x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
                let n = rmsnorm(x, &l.mlp_norm, c.rms_norm_eps);
                let (g, u) = (matvec(&l.gate, &n), matvec(&l.up, &n));
                let act: Vec<f32> = g
                    .iter()
                    .zip(&u)
                    .map(|(&g, &u)| (activation(c.activation, g as f64) * u as f64) as f32)
                    .collect();
                let mut down = matvec(&l.down, &act);
                if let Some((_, post)) = &l.post_norms {
                    down = rmsnorm(&down, post, c.rms_norm_eps);
                }
                x.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
            }
        }
        xs.iter()
            .map(|x| matvec(&self.lm_head, &rmsnorm(x, &self.norm, c.rms_norm_eps)))
            .collect()
    }
}
