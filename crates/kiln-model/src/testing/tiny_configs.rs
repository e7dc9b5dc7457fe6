//! The tiny random models of the dense architectures with RMSNorms that the tests run:
//! [`TinyConfig`]'s constructors for Qwen, Gemma, Phi-3, OLMo 2, Granite and the other
//! Llama-like layers (the default is a two-layer Llama). The LayerNorm families' are in
//! [`super::tiny_layer_norm_configs`], the mixtures of experts' in [`super::tiny_moe_configs`].

use super::TinyConfig;
use crate::{Architecture, LongRope, RopeScaling};

impl TinyConfig {
    pub fn qwen2() -> Self {
        TinyConfig {
            architecture: Architecture::Qwen2,
            ..Default::default()
        }
    }

    /// Qwen3: per-head q/k norms, no biases, and (as in the real models) a head_dim that is
    /// not hidden_size / num_heads.
    pub fn qwen3() -> Self {
        TinyConfig {
            architecture: Architecture::Qwen3,
            head_dim: 32,
            ..Default::default()
        }
    }

    /// Qwen3 with YaRN: factor 4 over an original context of 64 (the model's is 512), so the
    /// ramp between kept and stretched frequencies spans pairs 0 to 5 of the 16, and cos
    /// and sin are scaled by YaRN's default 0.1 ln 4 + 1.
    pub fn qwen3_yarn() -> Self {
        TinyConfig {
            rope_scaling: Some(RopeScaling::Yarn(crate::Yarn {
                factor: 4.0,
                original_max_position_embeddings: 64,
                beta_fast: 32.0,
                beta_slow: 1.0,
                attention_factor: crate::Yarn::mscale(4.0, 1.0) as f32,
                truncate: true,
            })),
            ..Self::qwen3()
        }
    }

    /// Gemma 3: four layers, the second and fourth global (pattern 2), a window of 12, local
    /// RoPE base 10000 and global 1e6, tied embeddings. Its Hugging Face folder also scales
    /// queries by 1/sqrt(24) (not head_dim 32) and stores norm gains minus one, so it loads as
    /// another model than its GGUF file, whose config [`Self::model_config`] gives.
    pub fn gemma3() -> Self {
        TinyConfig {
            architecture: Architecture::Gemma3,
            head_dim: 32,
            num_layers: 4,
            rope_theta: 1.0e6,
            tie_word_embeddings: true,
            sliding_window: Some(12),
            sliding_window_pattern: Some(2),
            ..Default::default()
        }
    }

    /// Gemma 2: Gemma 3's shape without q/k norms, every second layer global (a window of 12,
    /// one RoPE base), and soft caps low enough that these small weights' scores (up to about
    /// 1.5) and logits (about 3) are well inside tanh's bend: 1 and 2. Its Hugging Face
    /// folder, as Gemma 3's, scales queries by 1/sqrt(24) and stores norm gains minus one.
    pub fn gemma2() -> Self {
        TinyConfig {
            architecture: Architecture::Gemma2,
            attn_softcap: Some(1.0),
            final_softcap: Some(2.0),
            rope_theta: 10000.0,
            ..Self::gemma3()
        }
    }

    /// SmolLM3: Llama's layer, four layers of which the fourth applies no RoPE, tied
    /// embeddings; a RoPE base of 10 turns the rotations fast enough that leaving out the
    /// fourth layer's moves the logits by far more than the tests' tolerances.
    pub fn smollm3() -> Self {
        TinyConfig {
            architecture: Architecture::SmolLM3,
            num_layers: 4,
            rope_theta: 10.0,
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// Phi-3: fused q/k/v and gate/up tensors, and LongRoPE with an original context of 64
    /// (the model's is 512, so the long factors apply; the 50 positions of the tests cross
    /// the original context's fastest and slowest frequencies alike).
    pub fn phi3() -> Self {
        let half = 8;
        TinyConfig {
            architecture: Architecture::Phi3,
            rope_scaling: Some(RopeScaling::LongRope(LongRope {
                short_factor: (0..half).map(|i| 1.0 + 0.1 * i as f32).collect(),
                long_factor: (0..half).map(|i| 1.0 + 1.5 * i as f32).collect(),
                original_max_position_embeddings: 64,
                attention_factor: LongRope::default_attention_factor(512, 64),
            })),
            ..Default::default()
        }
    }

    /// Phi-4-mini: Phi-3 with a partial rotary embedding (12 of each head's 16 dimensions turn,
    /// its factor 0.75), LongRoPE factors for those 6 pairs, tied embeddings.
    pub fn phi4_mini() -> Self {
        let phi3 = Self::phi3();
        let Some(RopeScaling::LongRope(r)) = phi3.rope_scaling.clone() else {
            unreachable!("Phi-3's tiny model has LongRoPE")
        };
        TinyConfig {
            partial_rotary_dim: Some(12),
            rope_scaling: Some(RopeScaling::LongRope(LongRope {
                short_factor: r.short_factor[..6].to_vec(),
                long_factor: r.long_factor[..6].to_vec(),
                ..r
            })),
            tie_word_embeddings: true,
            ..phi3
        }
    }

    /// OLMo 2: no norms before the sub-layers, norms after them, and q and k each normalized
    /// whole (gains of 64 and 32).
    pub fn olmo2() -> Self {
        TinyConfig {
            architecture: Architecture::Olmo2,
            ..Default::default()
        }
    }

    /// OLMo 3: OLMo 2 with a window of 20 on three layers of four (the fourth global), the
    /// base 500000 that its configs give (transformers reads an older config's sliding
    /// layers at that base whatever `rope_theta` says).
    pub fn olmo3() -> Self {
        TinyConfig {
            num_layers: 4,
            sliding_window: Some(20),
            sliding_window_pattern: Some(4),
            rope_theta: 500000.0,
            ..Self::olmo2()
        }
    }

    /// EXAONE 4: OLMo 2's norms with per-head q/k norms, four layers of which the second and
    /// fourth are global and apply no RoPE (a window of 20 on the others; the RoPE base of 100
    /// turns fast enough that leaving out a global layer's rotation shows).
    pub fn exaone4() -> Self {
        TinyConfig {
            architecture: Architecture::Exaone4,
            num_layers: 4,
            sliding_window: Some(20),
            sliding_window_pattern: Some(2),
            rope_theta: 100.0,
            ..Default::default()
        }
    }

    /// GLM-4: q/k/v biases, norms on both sub-layers' outputs, gate and up fused, and a
    /// rotary embedding on the first 8 of each head's 16 dimensions, stored side by side in
    /// pairs (a RoPE base of 100 turns them fast enough that the pairs' order shows).
    pub fn glm4() -> Self {
        TinyConfig {
            architecture: Architecture::Glm4,
            partial_rotary_dim: Some(8),
            rope_theta: 100.0,
            ..Default::default()
        }
    }

    /// InternLM2: Llama's layer under its own names, two query heads to each of two KV heads,
    /// q, k and v one tensor in its folder (`wqkv`, each KV group's queries, key and value
    /// together). Its GGUF files keep them apart: [`Self::internlm2_gguf`].
    pub fn internlm2() -> Self {
        TinyConfig {
            architecture: Architecture::InternLm2,
            fused_qkv: true,
            ..Default::default()
        }
    }

    /// InternLM2 as llama.cpp's converter writes it: q, k and v apart.
    pub fn internlm2_gguf() -> Self {
        TinyConfig {
            fused_qkv: false,
            ..Self::internlm2()
        }
    }

    /// EXAONE 3.5: Llama's layer under its own names, grouped attention, tied embeddings (as
    /// its 2.4B has), Llama 3's RoPE scaling (as its configs have).
    pub fn exaone() -> Self {
        TinyConfig {
            architecture: Architecture::Exaone,
            tie_word_embeddings: true,
            rope_theta: 1.0e6,
            rope_scaling: Some(crate::RopeScaling::Llama3(crate::Llama3Rope {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 64,
            })),
            ..Default::default()
        }
    }

    /// OLMo: Llama's attention and gated MLP on LayerNorms without gain or bias, an untied
    /// head.
    pub fn olmo() -> Self {
        TinyConfig {
            architecture: Architecture::Olmo,
            ..Default::default()
        }
    }

    /// ERNIE 4.5: Llama's layer with each head's rotary pairs side by side in the stored q
    /// and k rows (a RoPE base of 100 turns them fast enough that the pairs' order shows).
    pub fn ernie45() -> Self {
        TinyConfig {
            architecture: Architecture::Ernie45,
            rope_theta: 100.0,
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// Seed-OSS: Llama's layer with q/k/v biases.
    pub fn seed_oss() -> Self {
        TinyConfig {
            architecture: Architecture::SeedOss,
            ..Default::default()
        }
    }

    /// Arcee: Llama's attention and a MLP without a gate, relu(x)^2.
    pub fn arcee() -> Self {
        TinyConfig {
            architecture: Architecture::Arcee,
            ..Default::default()
        }
    }

    /// Hunyuan (dense): per-head q/k norms after the rotary embedding, and a RoPE base of
    /// about 100 reached as the folders reach theirs, a smaller base stretched by an NTK alpha.
    pub fn hunyuan_dense() -> Self {
        TinyConfig {
            architecture: Architecture::HunyuanDense,
            rope_theta: 100.0,
            ..Default::default()
        }
    }

    /// Granite: Llama's layer with its four multipliers, none of them 1 (embeddings tripled,
    /// an attention scale of 0.7 rather than 1/sqrt(16), sub-layer outputs times 1.6, logits
    /// divided by 0.7: larger than the real models' so that one context token still moves
    /// these small random weights' logits far beyond the tests' tolerances).
    pub fn granite() -> Self {
        TinyConfig {
            architecture: Architecture::Granite,
            granite: Some(crate::GraniteScales {
                embedding: 3.0,
                attention: 0.7,
                residual: 1.6,
                logits: 0.7,
            }),
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// MiniCPM: Granite's layer, its multipliers given by MiniCPM's keys (`scale_emb` 2.5,
    /// `scale_depth` 2.4 over the square root of 2 layers, `dim_model_base` 128: logits divided
    /// by 64 / 128), the usual attention scale of 1/sqrt(16); tied embeddings, as MiniCPM 1B and
    /// 2B have.
    pub fn minicpm() -> Self {
        let base = Self::default();
        TinyConfig {
            architecture: Architecture::MiniCpm,
            granite: Some(crate::GraniteScales {
                embedding: 2.5,
                attention: crate::GraniteScales::plain_attention(base.head_dim),
                residual: (2.4 / (base.num_layers as f64).sqrt()) as f32,
                logits: (base.hidden_size as f64 / 128.0) as f32,
            }),
            tie_word_embeddings: true,
            ..base
        }
    }
}
