//! A plain CPU forward pass, the yardstick the GPU kernels and the whole model are tested
//! against. Dense causal attention over one sequence, f32 storage with f64 accumulation,
//! weights as the GPU stores them
//! (quantized types dequantized exactly, the others rounded through f16). Slow by design; only for tests.

use half::f16;
use kiln_model::{ModelConfig, ModelError, ModelTensors, Tensor, Weights};

struct Layer {
    attn_norm: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    bias: Option<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    /// Qwen3: the per-head q and k norm gains.
    qk_norm: Option<(Vec<f32>, Vec<f32>)>,
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

/// Rotates one head in place (HF rotate_half layout), in f64.
pub fn rope(head: &mut [f32], pos: usize, inv_freq: &[f64]) {
    let half = head.len() / 2;
    for i in 0..half {
        let (s, c) = (pos as f64 * inv_freq[i]).sin_cos();
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
        let mut layers = Vec::new();
        for t in &tensors.layers {
            let bias = match &t.qkv_bias {
                Some([q, k, v]) => Some((read(q)?, read(k)?, read(v)?)),
                None => None,
            };
            let qk_norm = match &t.qk_norm {
                Some([q, k]) => Some((read(q)?, read(k)?)),
                None => None,
            };
            layers.push(Layer {
                qk_norm,
                attn_norm: read(&t.attn_norm)?,
                q: get(&t.q.name)?,
                k: get(&t.k.name)?,
                v: get(&t.v.name)?,
                bias,
                o: get(&t.o.name)?,
                mlp_norm: read(&t.mlp_norm)?,
                gate: get(&t.gate.name)?,
                up: get(&t.up.name)?,
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
            norm: read(&tensors.final_norm)?,
            lm_head,
        })
    }

    /// Logits at every position of `tokens`.
    pub fn forward(&self, tokens: &[u32]) -> Vec<Vec<f32>> {
        let c = &self.config;
        let (h, nh, nkv, d) = (c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim);
        let inv_freq = c.rope_inv_freq_f64();
        let mut xs: Vec<Vec<f32>> = tokens
            .iter()
            .map(|&t| self.embed[t as usize * h..(t as usize + 1) * h].to_vec())
            .collect();
        for l in &self.layers {
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
                q.chunks_mut(d).for_each(|hd| rope(hd, pos, &inv_freq));
                k.chunks_mut(d).for_each(|hd| rope(hd, pos, &inv_freq));
                qs.push(q);
                ks.push(k);
                vs.push(v);
            }
            for (pos, x) in xs.iter_mut().enumerate() {
                let mut attn = vec![0f32; nh * d];
                for head in 0..nh {
                    let kvh = head / (nh / nkv);
                    let q = &qs[pos][head * d..(head + 1) * d];
                    let first = c.sliding_window.map_or(0, |w| (pos + 1).saturating_sub(w));
                    let scores: Vec<f64> = (first..=pos)
                        .map(|j| {
                            let k = &ks[j][kvh * d..(kvh + 1) * d];
                            q.iter()
                                .zip(k)
                                .map(|(a, b)| *a as f64 * *b as f64)
                                .sum::<f64>()
                                / (d as f64).sqrt()
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
                let o = matvec(&l.o, &attn);
                x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
                let n = rmsnorm(x, &l.mlp_norm, c.rms_norm_eps);
                let (g, u) = (matvec(&l.gate, &n), matvec(&l.up, &n));
                let act: Vec<f32> = g
                    .iter()
                    .zip(&u)
                    .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                    .collect();
                let down = matvec(&l.down, &act);
                x.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
            }
        }
        xs.iter()
            .map(|x| matvec(&self.lm_head, &rmsnorm(x, &self.norm, c.rms_norm_eps)))
            .collect()
    }
}
