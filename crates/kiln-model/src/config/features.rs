//! What sets a model apart from a plain Llama, in words: `kiln info`'s list.

use super::{Activation, ModelConfig, RopeScaling, Scoring};
use crate::{ModelTensors, Op};

impl ModelConfig {
    /// What sets this model apart from a plain Llama, in words (for `kiln info`).
    pub fn features(&self) -> Vec<String> {
        let mut f = Vec::new();
        if let Some(wrapper) = &self.text_model_of {
            f.push(format!(
                "the language model of a multimodal {wrapper} model, run on text (its vision \
                 tower is not read)"
            ));
        }
        if self.num_kv_heads < self.num_heads {
            f.push(format!(
                "grouped-query attention ({} query heads per KV head)",
                self.num_heads / self.num_kv_heads.max(1)
            ));
        }
        if self.attention_bias {
            f.push("q/k/v biases".into());
        }
        let tensors = ModelTensors::for_config(self);
        let ops = tensors.layers.iter().flat_map(|l| &l.ops);
        let qk_norm = ops.clone().find_map(|op| match op {
            Op::Rotary {
                qk_norm: Some([q, _]),
                norm_after,
            } => Some((q.len(), *norm_after)),
            _ => None,
        });
        match qk_norm {
            Some(_) if self.qk_layer_norm => {
                f.push("per-head q/k LayerNorm, a gain for each head".into())
            }
            Some((w, false)) if w == self.head_dim => f.push("per-head q/k RMSNorm".into()),
            Some((_, true)) => f.push("per-head q/k RMSNorm after the rotary embedding".into()),
            Some(_) => f.push("q/k RMSNorm over all heads".into()),
            None => {}
        }
        if (ops.clone()).any(|op| matches!(op, Op::Attention { sinks: Some(_) })) {
            f.push("attention sinks (a learned logit per head in each softmax)".into());
        }
        if (ops.clone()).any(|op| matches!(op, Op::Project { bias: Some(_), .. })) {
            f.push("a bias on the attention's output".into());
        }
        if ops.clone().any(|op| matches!(op, Op::AddNormed { .. })) {
            f.push("RMSNorm after attention and after the MLP".into());
        }
        let layer_norms = (tensors.layers.first().into_iter())
            .flat_map(|l| &l.ops)
            .filter_map(|op| match op {
                Op::LayerNorm { bias, .. } => Some(bias.is_some()),
                _ => None,
            })
            .collect::<Vec<_>>();
        let biases = match layer_norms.first() {
            Some(true) => "with biases",
            _ => "no bias",
        };
        if layer_norms.len() == 1 {
            f.push(format!(
                "one LayerNorm ({biases}) before attention and the MLP, which run side by side"
            ));
        } else if !layer_norms.is_empty() {
            f.push(format!("LayerNorms ({biases}) in place of RMSNorms"));
        } else if ops.clone().any(|op| {
            matches!(
                op,
                Op::NormedProject {
                    norm: None,
                    src: crate::Buf::Residual,
                    ..
                }
            )
        }) {
            f.push("no RMSNorm before attention and the MLP".into());
        }
        if let Some(m) = self.moe {
            let mut e = format!(
                "mixture of experts: {} experts of {}, {} a token{}",
                m.experts,
                m.intermediate_size,
                m.experts_per_token,
                match (m.scoring, m.normalize) {
                    (Scoring::Softmax, true) => " (their weights renormalized)",
                    (Scoring::Softmax, false) => "",
                    (Scoring::Sigmoid, true) => {
                        " (chosen by sigmoid scores and biases, renormalized)"
                    }
                    (Scoring::Sigmoid, false) => " (chosen by sigmoid scores and biases)",
                }
            );
            if m.scale != 1.0 {
                e += &format!(", weights times {}", m.scale);
            }
            if let Some(s) = m.shared {
                let gated = if s.gated { ", gated" } else { "" };
                e += &format!("; a shared expert of {}{gated}", s.intermediate_size);
            }
            if m.first_layer > 0 {
                e += &format!("; the first {} layers dense", m.first_layer);
            }
            f.push(e);
        }
        match self.activation {
            Activation::GeluTanh => f.push("GELU (tanh) gated MLP".into()),
            Activation::Gelu => f.push("GELU (exact, through erf)".into()),
            Activation::Relu2 => f.push("MLP without a gate, relu(x)^2".into()),
            Activation::ClampedSwiglu => f.push("clamped SwiGLU experts with biases".into()),
            Activation::Silu => {}
        }
        if self.embed_scale() != 1.0 {
            f.push(format!("embeddings scaled by {}", self.embed_scale()));
        }
        if self.tie_word_embeddings {
            f.push("tied embeddings".into());
        }
        if self.architecture.learned_positions() {
            f.push(format!(
                "learned position embeddings ({} positions), no rotary embedding",
                self.max_position_embeddings
            ));
        }
        match (self.sliding_window, self.sliding_window_pattern) {
            (Some(w), Some(n)) => f.push(format!(
                "sliding window of {w} positions, every {} layer global{}",
                ordinal(n),
                self.rope_local_theta
                    .map(|t| format!(" (RoPE base {t} on the sliding layers)"))
                    .unwrap_or_default()
            )),
            (Some(w), None) if self.first_sliding_layer > 0 => f.push(format!(
                "sliding window of {w} positions from layer {} on",
                self.first_sliding_layer
            )),
            (Some(w), None) => f.push(format!("sliding window of {w} positions on every layer")),
            _ => {}
        }
        if !self.no_rope_layers.is_empty() {
            f.push(format!(
                "no rotary embedding on layers {}",
                (self.no_rope_layers.iter())
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(g) = self.granite {
            f.push(format!(
                "attention scale {}, sub-layer outputs times {} into the residual stream, \
                 logits divided by {}",
                g.attention, g.residual, g.logits
            ));
        }
        if let Some(c) = self.attn_softcap {
            f.push(format!("attention scores soft-capped at {c}"));
        }
        if let Some(c) = self.final_softcap {
            f.push(format!("logits soft-capped at {c}"));
        }
        if let Some(r) = self.partial_rotary_dim {
            f.push(format!(
                "rotary embedding on {r} of {} dimensions a head",
                self.head_dim
            ));
        }
        if !crate::models::interleaved_rows(self).is_empty() {
            f.push(
                "rotary pairs side by side in the stored q and k rows (reordered on load)".into(),
            );
        }
        let global = match self.rope_local_theta {
            Some(_) => " on the global layers",
            None => "",
        };
        let scaling = match &self.rope_scaling {
            None => None,
            Some(RopeScaling::Linear(factor)) => {
                Some(format!("linear RoPE scaling (factor {factor})"))
            }
            Some(RopeScaling::Llama3(s)) => Some(format!(
                "Llama 3 RoPE scaling (factor {}, original context {})",
                s.factor, s.original_max_position_embeddings
            )),
            Some(RopeScaling::LongRope(r)) => Some(format!(
                "LongRoPE (original context {}, attention factor {})",
                r.original_max_position_embeddings, r.attention_factor
            )),
            Some(RopeScaling::Yarn(y)) => Some(format!(
                "YaRN RoPE scaling (factor {}, original context {}, attention factor {})",
                y.factor, y.original_max_position_embeddings, y.attention_factor
            )),
        };
        f.extend(scaling.map(|s| format!("{s}{global}")));
        f.push(format!(
            "RMSNorm eps {}, RoPE base {}",
            self.rms_norm_eps, self.rope_theta
        ));
        f
    }
}

/// `n` as an English ordinal: 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
