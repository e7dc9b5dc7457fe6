//! RoPE: the scalings of its frequencies (Llama 3's, LongRoPE, linear), each layer's
//! frequencies and base, and which dimensions of a head turn.

use super::ModelConfig;

/// Llama 3 style RoPE frequency scaling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeScaling {
    pub factor: f32,
    pub low_freq_factor: f32,
    pub high_freq_factor: f32,
    pub original_max_position_embeddings: usize,
}

/// Phi-3's LongRoPE: a divisor per rotary frequency, from the short list while the model's
/// context is within the original one and from the long list beyond it (kiln decides once, by
/// `max_position_embeddings`), and a factor on cos and sin.
#[derive(Debug, Clone, PartialEq)]
pub struct LongRope {
    pub short_factor: Vec<f32>,
    pub long_factor: Vec<f32>,
    pub original_max_position_embeddings: usize,
    /// cos and sin are multiplied by this (q and k each, so the scores by its square).
    pub attention_factor: f32,
}

impl LongRope {
    /// The factor on cos and sin when the config gives none: sqrt(1 + ln(s) / ln(original))
    /// for a context `s` times the original, 1 when it is not longer.
    pub fn default_attention_factor(max_position_embeddings: usize, original: usize) -> f32 {
        let s = max_position_embeddings as f64 / original as f64;
        if s <= 1.0 {
            1.0
        } else {
            (1.0 + s.ln() / (original as f64).ln()).sqrt() as f32
        }
    }
}

impl ModelConfig {
    /// Layer `i`'s RoPE base.
    pub fn layer_rope_theta(&self, i: usize) -> f32 {
        match (self.layer_window(i), self.rope_local_theta) {
            (Some(_), Some(local)) => local,
            _ => self.rope_theta,
        }
    }

    /// The dimensions of a head that the rotary embedding turns (all but with a partial one).
    pub fn rotary_dim(&self) -> usize {
        self.partial_rotary_dim.unwrap_or(self.head_dim)
    }

    /// The rotation pairs of layer `i`'s heads that turn: `rotary_dim / 2`, none on SmolLM3's
    /// layers without RoPE. The rest of a head's `head_dim / 2` pairs pass through.
    pub fn layer_rotated_pairs(&self, i: usize) -> usize {
        match self.no_rope_layers.contains(&i) {
            true => 0,
            false => self.rotary_dim() / 2,
        }
    }

    /// The `head_dim / 2` RoPE inverse frequencies, with Llama 3 scaling applied when
    /// configured; 0 for the pairs a partial rotary embedding passes through.
    pub fn rope_inv_freq(&self) -> Vec<f32> {
        self.rope_inv_freq_f64()
            .into_iter()
            .map(|f| f as f32)
            .collect()
    }

    /// The same frequencies in f64, for rotary tables computed on the CPU.
    pub fn rope_inv_freq_f64(&self) -> Vec<f64> {
        self.rope_inv_freq_for(self.rope_theta, self.rope_linear_factor)
    }

    /// The frequencies of layer `i` (its own base, unscaled, on Gemma 3's sliding layers; all
    /// 0 on SmolLM3's layers without RoPE, which so rotate by nothing).
    pub fn layer_rope_inv_freq(&self, i: usize) -> Vec<f64> {
        if self.no_rope_layers.contains(&i) {
            return vec![0.0; self.head_dim / 2];
        }
        match (self.layer_window(i), self.rope_local_theta) {
            (Some(_), Some(local)) => self.rope_inv_freq_for(local, None),
            _ => self.rope_inv_freq_f64(),
        }
    }

    fn rope_inv_freq_for(&self, theta: f32, linear: Option<f32>) -> Vec<f64> {
        let (half, rot) = (self.head_dim / 2, self.rotary_dim());
        let theta = theta as f64;
        let divisors = self.long_rope.as_ref().map(|r| {
            match self.max_position_embeddings > r.original_max_position_embeddings {
                true => &r.long_factor,
                false => &r.short_factor,
            }
        });
        (0..half)
            .map(|i| {
                if 2 * i >= rot {
                    return 0.0;
                }
                let inv = 1.0 / theta.powf((2 * i) as f64 / rot as f64);
                let inv = match &self.rope_scaling {
                    None => inv,
                    Some(s) => llama3_scale(inv, s),
                };
                inv / divisors.map_or(1.0, |d| d[i] as f64) / linear.map_or(1.0, f64::from)
            })
            .collect()
    }

    /// The factor on the rotary embedding's cos and sin (LongRoPE's; 1 otherwise).
    pub fn rope_attention_factor(&self) -> f64 {
        self.long_rope
            .as_ref()
            .map_or(1.0, |r| r.attention_factor as f64)
    }
}

/// Llama 3 frequency scaling of one inverse frequency.
pub(crate) fn llama3_scale(inv: f64, s: &RopeScaling) -> f64 {
    let orig = s.original_max_position_embeddings as f64;
    let (low, high, factor) = (
        s.low_freq_factor as f64,
        s.high_freq_factor as f64,
        s.factor as f64,
    );
    let wavelen = 2.0 * std::f64::consts::PI / inv;
    if wavelen < orig / high {
        inv
    } else if wavelen > orig / low {
        inv / factor
    } else {
        let smooth = (orig / wavelen - low) / (high - low);
        (1.0 - smooth) * inv / factor + smooth * inv
    }
}
