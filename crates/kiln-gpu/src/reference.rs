//! A plain CPU forward pass, the yardstick the GPU kernels and the whole model are tested
//! against. Dense causal attention over one sequence, f32 storage with f64 accumulation,
//! weights as the GPU stores them (quantized types dequantized exactly, the others rounded
//! through f16). Slow by design; only for tests.

mod activation;
mod attention;
mod experts;
mod load;
mod row;
mod scores;
mod step;

pub use activation::{activation, erf, gated};
pub use experts::route;
pub use row::{layernorm, layernorm_bias, matvec, rmsnorm, rope};
pub use scores::{alibi_slope, soft_cap};

use kiln_model::ModelConfig;

use self::step::{Rows, Step};
use crate::KvDtype;

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

impl CpuModel {
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
}
