//! `ModelConfig`: the architecture hyper-parameters (parsed from a Hugging Face `config.json`
//! in `hf_config`, from GGUF metadata in `gguf::config`), plus what follows from them: RoPE
//! frequencies, per-layer windows, scales.

mod architecture;
mod features;
mod rope;

pub use architecture::Architecture;

pub(crate) use rope::llama3_scale;
pub use rope::{LayerRope, Llama3Rope, LongRope, RopeScaling, Yarn};

use crate::{GenerationDefaults, ModelError, ModelTensors, Weights};

/// The most experts a token is routed to that kiln runs (the router's launch keeps its choices
/// in registers).
pub const MAX_EXPERTS_PER_TOKEN: usize = 16;

/// A mixture of experts in place of the MLP: each token's router logits (one per expert)
/// are scored ([`Scoring`]), the `experts_per_token` best experts (by score, or by score plus
/// a bias of each expert's where `choice_bias`) are run on the token (each a gated MLP of
/// `intermediate_size`), and their outputs are summed, weighted by their scores
/// (renormalized over the chosen ones where `normalize`, then times `scale`); a shared expert,
/// where there is one, runs on every token besides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    pub experts: usize,
    pub experts_per_token: usize,
    pub intermediate_size: usize,
    pub normalize: bool,
    pub scoring: Scoring,
    /// Experts are chosen by their scores plus a bias of each (`e_score_correction_bias`, a
    /// tensor of the layer), and weighted by their scores alone (GLM-4.5's, ERNIE 4.5's).
    pub choice_bias: bool,
    /// The chosen experts' weights are multiplied by this (GLM-4.5's `routed_scaling_factor`;
    /// 1 elsewhere).
    pub scale: f32,
    pub shared: Option<SharedExpert>,
    /// The layers before this one have a dense MLP of the model's `intermediate_size` in
    /// place of the experts (GLM-4.5's `first_k_dense_replace`).
    pub first_layer: usize,
}

impl Moe {
    /// Experts chosen by the softmax of their logits, on every layer, none shared.
    pub fn softmax(
        experts: usize,
        experts_per_token: usize,
        intermediate_size: usize,
        normalize: bool,
    ) -> Self {
        Moe {
            experts,
            experts_per_token,
            intermediate_size,
            normalize,
            scoring: Scoring::Softmax,
            choice_bias: false,
            scale: 1.0,
            shared: None,
            first_layer: 0,
        }
    }
}

/// How a router's logits weigh the experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// The softmax over all experts; the most probable are chosen.
    Softmax,
    /// Each logit's sigmoid, not normalized across experts (GLM-4.5's, DeepSeek V3's).
    Sigmoid,
}

/// An expert every token runs besides its routed ones: a gated MLP of `intermediate_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedExpert {
    pub intermediate_size: usize,
    /// Its output is scaled by the sigmoid of a row of its own times the normalized input
    /// (Qwen2 MoE's `shared_expert_gate`).
    pub gated: bool,
}

/// The activation of the MLP: of its gate, or of its one product where it has no gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Silu,
    /// GELU with the tanh approximation.
    GeluTanh,
    /// GELU as defined, `x * Phi(x)` through the error function (GPT-NeoX's `gelu`).
    Gelu,
    /// `relu(x)^2`, of a MLP without a gate (Arcee's).
    Relu2,
    /// gpt-oss's: gate clamped above at 7, up to [-7, 7], then
    /// `gate * sigmoid(1.702 gate) * (up + 1)`.
    ClampedSwiglu,
}

/// Granite's multipliers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraniteScales {
    /// The embedding rows are multiplied by this.
    pub embedding: f32,
    /// The attention scores' scale (in place of `1/sqrt(head_dim)`).
    pub attention: f32,
    /// Each sub-layer's output is multiplied by this on its way into the residual stream.
    pub residual: f32,
    /// The logits are divided by this.
    pub logits: f32,
}

impl GraniteScales {
    /// The usual attention scale, `1/sqrt(head_dim)`: the attention multiplier of the
    /// families that keep it (MiniCPM, Cohere; Granite's files that give none).
    pub fn plain_attention(head_dim: usize) -> f32 {
        (1.0 / (head_dim as f64).sqrt()) as f32
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    /// How the global layers' rotary frequencies are stretched (Gemma 3's sliding layers
    /// keep their own base unscaled).
    pub rope_scaling: Option<RopeScaling>,
    pub tie_word_embeddings: bool,
    /// Qwen2: q/k/v projections have biases.
    pub attention_bias: bool,
    /// Mistral and Gemma 3: each token attends to at most this many of the latest positions,
    /// itself included (`None`: to all of them), on every layer or as `sliding_window_pattern`
    /// says.
    pub sliding_window: Option<usize>,
    /// Qwen2 and Qwen3: the layers before this one attend to every position
    /// (`max_window_layers`); 0 elsewhere.
    pub first_sliding_layer: usize,
    /// Gemma 2 and 3: every `n`th layer (Gemma 3's 6th, 12th, ...; Gemma 2's 2nd, 4th, ...)
    /// is global, the others slide.
    pub sliding_window_pattern: Option<usize>,
    /// Gemma 3 and OLMo 3: the RoPE base of the sliding layers, which turn without the global
    /// layers' scaling (`rope_theta` is the global layers').
    pub rope_local_theta: Option<f32>,
    /// Gemma: attention scores are scaled by `1/sqrt(query_pre_attn_scalar)` instead of
    /// `1/sqrt(head_dim)`.
    pub query_pre_attn_scalar: Option<f32>,
    /// SmolLM3: the layers that apply no rotary embedding (NoPE), ascending.
    pub no_rope_layers: Vec<usize>,
    /// Partial rotary embedding (Phi-4-mini's `partial_rotary_factor`): only the first this
    /// many dimensions of each q and k head turn, the rest pass through (`None`: all of them).
    pub partial_rotary_dim: Option<usize>,
    /// q, k and v as one matrix and one bias (`self_attn.qkv_proj`), as Phi-2's GGUF files
    /// converted from its first release keep them (`attn_qkv`); Phi-3's are always fused and
    /// named so by its layer, whatever this says.
    pub fused_qkv: bool,
    /// Each head of q and of k LayerNorm'd (mean taken out, no bias) before it turns, with a
    /// gain for each head (`q_norm` and `k_norm` stored `[heads, head_dim]`): Command-R+'s
    /// `use_qk_norm`, and StableLM 2 12B's `qk_layernorm` (whose folders keep each head's
    /// gain as a tensor of its own, stacked on load).
    pub qk_layer_norm: bool,
    /// Attention and the MLP side by side on one LayerNorm of the residual stream, where the
    /// family otherwise runs them one after the other (StableLM 2 12B's
    /// `use_parallel_residual`; Command-R's always are; GPT-NeoX's, where its config says,
    /// and Falcon's always, on [`Self::mlp_norm`]).
    pub parallel_residual: bool,
    /// Side by side, the MLP reads a LayerNorm of its own, taken of the same residual stream
    /// as attention's (GPT-NeoX's `post_attention_layernorm`, Falcon 40B's `ln_mlp`), not
    /// attention's (Falcon 7B's one `input_layernorm`). Read by GPT-NeoX and Falcon only.
    pub mlp_norm: bool,
    /// ALiBi's biases on the attention scores, with this maximum (BLOOM's and MPT's: 8), in
    /// place of a rotary embedding: head h's scores fall by its slope times each key's
    /// distance from the query.
    pub alibi: Option<f32>,
    /// Granite's multipliers.
    pub granite: Option<GraniteScales>,
    /// Gemma 2: attention scores become `cap * tanh(score / cap)` (after the scale).
    pub attn_softcap: Option<f32>,
    /// Gemma 2: the output logits become `cap * tanh(logit / cap)`.
    pub final_softcap: Option<f32>,
    /// Added to every RMSNorm gain as read: 1 for Gemma's Hugging Face files, which store the
    /// gain minus one (GGUF files store the gain).
    pub norm_gain_offset: f32,
    pub activation: Activation,
    /// The mixture of experts every layer has in place of its MLP (`Qwen3Moe`).
    pub moe: Option<Moe>,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
    /// The sampling settings the model ships with (the front ends' request defaults).
    pub generation: GenerationDefaults,
    /// The multimodal wrapper (its `model_type`: `gemma3`, `mistral3`, ...; a GGUF file's
    /// `qwen2vl` or `qwen3vl`) whose language model this is, run on text: its vision tower is
    /// not read.
    pub text_model_of: Option<String>,
}

impl ModelConfig {
    /// The factor the embedding rows are multiplied by (Gemma: sqrt of the hidden size).
    pub fn embed_scale(&self) -> f32 {
        match (self.architecture.is_gemma(), self.granite) {
            (true, _) => (self.hidden_size as f32).sqrt(),
            (false, Some(g)) => g.embedding,
            (false, None) => 1.0,
        }
    }

    /// The widest MLP the layers run outside their routed experts: a dense MLP's or a shared
    /// expert's (the width of [`crate::Buf::Act`]); 0 where every layer's MLP is experts.
    pub fn mlp_width(&self) -> usize {
        let rows = |ts: &[crate::Tensor]| ts.iter().map(|t| t.shape[0]).sum::<usize>();
        (ModelTensors::for_config(self).layers.iter())
            .flat_map(|l| &l.ops)
            .filter_map(|op| match op {
                crate::Op::NormedProject {
                    weights,
                    dst: crate::Buf::GateUp,
                    ..
                } => Some(rows(weights) / 2),
                crate::Op::NormedProject {
                    weights,
                    dst: crate::Buf::Act,
                    ..
                } => Some(rows(weights)),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// The attention scores' scale.
    pub fn attention_scale(&self) -> f32 {
        if let Some(g) = self.granite {
            return g.attention;
        }
        1.0 / self
            .query_pre_attn_scalar
            .unwrap_or(self.head_dim as f32)
            .sqrt()
    }

    /// The factor on each sub-layer's output added into the residual stream (Granite's; 1
    /// otherwise).
    pub fn residual_scale(&self) -> f32 {
        self.granite.map_or(1.0, |g| g.residual)
    }

    /// The divisor of the logits (Granite's; 1 otherwise).
    pub fn logits_divisor(&self) -> f32 {
        self.granite.map_or(1.0, |g| g.logits)
    }

    /// An RMSNorm gain as the forward pass multiplies by it: the stored values plus
    /// `norm_gain_offset`.
    pub fn read_gain(&self, weights: &Weights, name: &str) -> Result<Vec<f32>, ModelError> {
        let mut v = weights.read_f32(name)?;
        v.iter_mut().for_each(|g| *g += self.norm_gain_offset);
        Ok(v)
    }

    /// Layer `i`'s sliding window (`None`: global).
    pub fn layer_window(&self, i: usize) -> Option<usize> {
        if i < self.first_sliding_layer {
            return None;
        }
        match self.sliding_window_pattern {
            Some(n) if (i + 1) % n.max(1) == 0 => None,
            _ => self.sliding_window,
        }
    }

    /// The window every layer slides within (the largest, if they differ), or `None` when
    /// any layer is global: with it, no layer reads a position before the window of the
    /// next token, so the scheduler gives back the blocks left behind.
    pub fn every_layer_window(&self) -> Option<usize> {
        (0..self.num_layers).try_fold(0, |m, i| self.layer_window(i).map(|w| m.max(w)))
    }

    /// Total number of parameters (embeddings counted once when tied).
    pub fn param_count(&self) -> usize {
        let tensors = ModelTensors::for_config(self);
        tensors.all().iter().map(|t| t.len()).sum()
    }

    /// Basic sanity checks shared by both file formats.
    pub(crate) fn validate(&self, file: &str) -> Result<(), ModelError> {
        let bad = |r: String| Err(ModelError::config(file, r));
        if self.num_layers == 0
            || self.hidden_size == 0
            || self.num_heads == 0
            || self.vocab_size == 0
        {
            return bad(format!(
                "zero-sized model (layers {}, hidden {}, heads {}, vocab {})",
                self.num_layers, self.hidden_size, self.num_heads, self.vocab_size
            ));
        }
        if self.num_kv_heads == 0 || self.num_heads % self.num_kv_heads != 0 {
            return bad(format!(
                "num_heads {} is not a multiple of num_kv_heads {}",
                self.num_heads, self.num_kv_heads
            ));
        }
        if self.head_dim == 0 || self.head_dim % 2 != 0 {
            return bad(format!(
                "head_dim {} must be even and non-zero",
                self.head_dim
            ));
        }
        // Arcee's, Nemotron's, StarCoder2's, Phi-2's and GPT-NeoX's MLPs have no gate, the
        // others' have one: relu^2 runs only so, and GELU (tanh) so on StarCoder2 and Phi-2;
        // GPT-NeoX's GELU is exact or the tanh approximation, as its config says; gpt-oss's
        // clamped SwiGLU runs on its experts only.
        let own: &[Activation] = match self.architecture {
            Architecture::Arcee | Architecture::Nemotron => &[Activation::Relu2],
            Architecture::Starcoder2 | Architecture::Phi2 | Architecture::GptJ => {
                &[Activation::GeluTanh]
            }
            Architecture::GptNeox => &[Activation::Gelu, Activation::GeluTanh],
            Architecture::GptOss => &[Activation::ClampedSwiglu],
            _ => &[],
        };
        let owned = matches!(
            self.activation,
            Activation::Relu2 | Activation::ClampedSwiglu
        );
        if (!own.is_empty() && !own.contains(&self.activation)) || (own.is_empty() && owned) {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!(
                    "the MLP activation {:?} on {}",
                    self.activation,
                    self.architecture.gguf_name()
                ),
            });
        }
        let experts = matches!(
            self.architecture,
            Architecture::Qwen3Moe
                | Architecture::Mixtral
                | Architecture::Olmoe
                | Architecture::Qwen2Moe
                | Architecture::Glm4Moe
                | Architecture::Ernie45Moe
                | Architecture::GraniteMoe
                | Architecture::Dots1
                | Architecture::HunyuanMoe
                | Architecture::GptOss
        );
        if experts != self.moe.is_some() {
            return bad(format!(
                "{} with experts {:?}",
                self.architecture.gguf_name(),
                self.moe
            ));
        }
        if let Some(m) = self.moe
            && (m.experts == 0
                || m.experts_per_token == 0
                || m.experts_per_token > m.experts.min(MAX_EXPERTS_PER_TOKEN)
                || m.intermediate_size == 0
                || m.shared.is_some_and(|s| s.intermediate_size == 0)
                || m.first_layer > self.num_layers
                || !(m.scale.is_finite() && m.scale > 0.0))
        {
            return bad(format!(
                "{} experts, {} a token (at most {MAX_EXPERTS_PER_TOKEN}), of {} intermediate \
                 size, shared {:?}, from layer {} of {}, weights scaled by {}",
                m.experts,
                m.experts_per_token,
                m.intermediate_size,
                m.shared,
                m.first_layer,
                self.num_layers,
                m.scale
            ));
        }
        if let Some(&i) = self.no_rope_layers.iter().find(|&&i| i >= self.num_layers) {
            return bad(format!(
                "layer {i} is named as without RoPE, but the model has {} layers",
                self.num_layers
            ));
        }
        if let Some(g) = self.granite {
            let all = [g.embedding, g.attention, g.residual, g.logits];
            if all.iter().any(|m| !(m.is_finite() && *m > 0.0)) {
                return bad(format!(
                    "Granite's multipliers (embedding, attention, residual, logits) {all:?} \
                     must be positive numbers"
                ));
            }
        }
        for (what, cap) in [
            ("attention", self.attn_softcap),
            ("final logit", self.final_softcap),
        ] {
            if let Some(c) = cap.filter(|c| !(c.is_finite() && *c > 0.0)) {
                return bad(format!("{what} soft cap {c} must be a positive number"));
            }
        }
        if let Some(r) = self.partial_rotary_dim {
            if r == 0 || r % 2 != 0 || r > self.head_dim {
                return bad(format!(
                    "a partial rotary embedding of {r} dimensions (head_dim {}): it must be even, \
                     non-zero and at most head_dim",
                    self.head_dim
                ));
            }
        }
        if let Some(RopeScaling::LongRope(r)) = &self.rope_scaling {
            let half = self.rotary_dim() / 2;
            if r.short_factor.len() != half || r.long_factor.len() != half {
                return bad(format!(
                    "LongRoPE factors of {} and {} values; {} rotary dimensions need {half}",
                    r.short_factor.len(),
                    r.long_factor.len(),
                    self.rotary_dim()
                ));
            }
        }
        Ok(())
    }

    /// Adds ids not yet present to `eos_token_ids` (keeps order, no duplicates).
    pub(crate) fn merge_eos(&mut self, ids: impl IntoIterator<Item = u32>) {
        for id in ids {
            if !self.eos_token_ids.contains(&id) {
                self.eos_token_ids.push(id);
            }
        }
    }
}
