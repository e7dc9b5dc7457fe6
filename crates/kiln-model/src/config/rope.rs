//! RoPE: how a model stretches its frequencies past the context it was trained on (linear,
//! Llama 3's, Phi-3's LongRoPE, YaRN), each layer's frequencies and base, and which dimensions
//! of a head turn.

use super::ModelConfig;

/// A scaling of the rotary frequencies: at most one a model (Hugging Face's `rope_scaling`,
/// GGUF's `rope.scaling.*`).
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// Position interpolation (`rope_type: "linear"`): every frequency divided by this factor;
    /// on Gemma 3 (4B and larger) only on the global layers, the sliding layers keeping their
    /// own base unscaled.
    Linear(f32),
    Llama3(Llama3Rope),
    /// Phi-3's.
    LongRope(LongRope),
    Yarn(Yarn),
}

/// Llama 3's scaling: low frequencies divided by `factor`, high ones kept, a smooth blend
/// between.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3Rope {
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

/// YaRN (Qwen's and SmolLM3's long contexts): the frequencies that turn fewer than
/// `beta_slow` times over the original context are divided by `factor`, those that turn more
/// than `beta_fast` times are kept, with a linear ramp over the rotary pairs between, and cos
/// and sin are multiplied by `attention_factor`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    pub factor: f32,
    pub original_max_position_embeddings: usize,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// cos and sin are multiplied by this: `0.1 ln(factor) + 1` unless the model says.
    pub attention_factor: f32,
    /// Whether the ramp's ends are rounded out to whole pairs (the usual; gpt-oss does not).
    pub truncate: bool,
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

    /// The divisors of a model whose context is `max_position_embeddings`.
    pub fn divisors(&self, max_position_embeddings: usize) -> &[f32] {
        match max_position_embeddings > self.original_max_position_embeddings {
            true => &self.long_factor,
            false => &self.short_factor,
        }
    }
}

impl Yarn {
    /// YaRN's `mscale`: the factor on cos and sin for a stretch of `factor` (1 when it does
    /// not stretch); DeepSeek's configs give `mscale` and `mscale_all_dim`, whose ratio of
    /// these is the factor.
    pub fn mscale(factor: f64, mscale: f64) -> f64 {
        if factor <= 1.0 {
            1.0
        } else {
            0.1 * mscale * factor.ln() + 1.0
        }
    }

    /// The ramp's ends in rotary pairs for `rot` turning dimensions at base `theta`: the pair
    /// that turns `beta_fast` times over the original context, and the one that turns
    /// `beta_slow` times.
    fn ramp(&self, rot: usize, theta: f64) -> (f64, f64) {
        let pair = |turns: f32| {
            let orig = self.original_max_position_embeddings as f64;
            rot as f64 * (orig / (turns as f64 * 2.0 * std::f64::consts::PI)).ln()
                / (2.0 * theta.ln())
        };
        let (mut low, mut high) = (pair(self.beta_fast), pair(self.beta_slow));
        if self.truncate {
            (low, high) = (low.floor(), high.ceil());
        }
        (low.max(0.0), high.min(rot as f64 - 1.0))
    }

    /// Pair `i`'s inverse frequency: `inv` (unscaled) blended with `inv / factor`.
    fn scale(&self, inv: f64, i: usize, (low, high): (f64, f64)) -> f64 {
        let high = if low == high { high + 0.001 } else { high };
        let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
        inv / self.factor as f64 * ramp + inv * (1.0 - ramp)
    }
}

/// One layer's rotary embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRope {
    /// The inverse frequencies of the rotation pairs that turn, the first `inv_freq.len()` of
    /// a head: `rotary_dim / 2` of them, none on SmolLM3's layers without RoPE. The rest of
    /// the head's `head_dim / 2` pairs pass through.
    pub inv_freq: Vec<f64>,
    /// The factor on the turning pairs' cos and sin (LongRoPE's and YaRN's; 1 otherwise).
    pub attention_factor: f64,
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

    /// Layer `i`'s rotary embedding: the global layers' (scaled as the model says), the
    /// sliding layers' of a model that gives them a base of their own (Gemma 3, OLMo 3:
    /// [`Self::layer_rope_theta`], unscaled), or none (SmolLM3's layers without RoPE, and
    /// every layer of a model with learned positions, GPT-2's, or with ALiBi).
    pub fn layer_rope(&self, i: usize) -> LayerRope {
        if self.no_rope_layers.contains(&i)
            || self.architecture.learned_positions()
            || self.alibi.is_some()
        {
            return LayerRope {
                inv_freq: Vec::new(),
                attention_factor: 1.0,
            };
        }
        let own_base = self.layer_window(i).is_some() && self.rope_local_theta.is_some();
        let scaling = self.rope_scaling.as_ref().filter(|_| !own_base);
        LayerRope {
            inv_freq: self.rope_inv_freq_for(self.layer_rope_theta(i), scaling),
            attention_factor: match scaling {
                Some(RopeScaling::LongRope(r)) => r.attention_factor as f64,
                Some(RopeScaling::Yarn(y)) => y.attention_factor as f64,
                _ => 1.0,
            },
        }
    }

    /// The `rotary_dim / 2` inverse frequencies at base `theta`, scaled by `scaling`.
    fn rope_inv_freq_for(&self, theta: f32, scaling: Option<&RopeScaling>) -> Vec<f64> {
        let rot = self.rotary_dim();
        let theta = theta as f64;
        let yarn_ramp = match scaling {
            Some(RopeScaling::Yarn(y)) => y.ramp(rot, theta),
            _ => (0.0, 0.0),
        };
        (0..rot / 2)
            .map(|i| {
                let inv = 1.0 / theta.powf((2 * i) as f64 / rot as f64);
                match scaling {
                    None => inv,
                    Some(RopeScaling::Linear(f)) => inv / *f as f64,
                    Some(RopeScaling::Llama3(s)) => llama3_scale(inv, s),
                    Some(RopeScaling::LongRope(r)) => {
                        inv / r.divisors(self.max_position_embeddings)[i] as f64
                    }
                    Some(RopeScaling::Yarn(y)) => y.scale(inv, i, yarn_ramp),
                }
            })
            .collect()
    }
}

/// Llama 3 frequency scaling of one inverse frequency.
pub(crate) fn llama3_scale(inv: f64, s: &Llama3Rope) -> f64 {
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
