//! The tiny random mixtures of experts: [`TinyConfig`]'s constructors for Qwen3 MoE, Mixtral,
//! OLMoE, Qwen2 MoE, GLM-4.5, ERNIE 4.5's MoE, GraniteMoeShared, dots.llm1, Hunyuan's MoE and
//! gpt-oss. Their experts come with the architecture ([`TinyConfig::model_config`] gives their
//! number and widths), so most constructors only name it, over the default or a dense
//! sibling's shape.

use super::TinyConfig;
use crate::Architecture;

impl TinyConfig {
    /// Qwen3 MoE: Qwen3's attention and 5 experts of 64 a layer, 2 a token, their weights
    /// renormalized.
    pub fn qwen3_moe() -> Self {
        TinyConfig {
            architecture: Architecture::Qwen3Moe,
            ..Self::qwen3()
        }
    }

    /// Mixtral: Llama's attention and 4 experts of the MLP's size a layer, 2 a token.
    pub fn mixtral() -> Self {
        TinyConfig {
            architecture: Architecture::Mixtral,
            ..Default::default()
        }
    }

    /// OLMoE: whole-q/k norms, 6 experts of the MLP's size a layer, 3 a token, their weights
    /// not renormalized.
    pub fn olmoe() -> Self {
        TinyConfig {
            architecture: Architecture::Olmoe,
            ..Default::default()
        }
    }

    /// Qwen2 MoE: Qwen2's attention (biases), 6 experts of 32 a layer, 2 a token, their
    /// weights not renormalized, and a gated shared expert of 192 (wider than the model's
    /// MLP of 160, as Qwen2-57B's is).
    pub fn qwen2_moe() -> Self {
        TinyConfig {
            architecture: Architecture::Qwen2Moe,
            ..Default::default()
        }
    }

    /// GLM-4.5: three layers, the first dense; q/k/v biases, the first half of each head
    /// turning (base 100, fast enough that a wrong pair order shows); 8 experts of 32, 3 a
    /// token, chosen by sigmoid scores plus each expert's bias, their weights renormalized
    /// and times 2.5, and a shared expert of one expert's size.
    pub fn glm4_moe() -> Self {
        TinyConfig {
            architecture: Architecture::Glm4Moe,
            num_layers: 3,
            partial_rotary_dim: Some(8),
            rope_theta: 100.0,
            ..Default::default()
        }
    }

    /// ERNIE 4.5's MoE: three layers, the first dense; rotary pairs side by side (base 100);
    /// 6 experts of 32, 2 a token, chosen by softmax scores plus each expert's bias, renormalized;
    /// two shared experts' worth (64) of shared expert; tied embeddings.
    pub fn ernie45_moe() -> Self {
        TinyConfig {
            architecture: Architecture::Ernie45Moe,
            num_layers: 3,
            rope_theta: 100.0,
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// GraniteMoeShared: Granite's multipliers (as [`Self::granite`]), 4 experts of the MLP's
    /// size a layer, 2 a token, renormalized, and a shared expert of 96.
    pub fn granite_moe() -> Self {
        TinyConfig {
            architecture: Architecture::GraniteMoe,
            ..Self::granite()
        }
    }

    /// dots.llm1: Qwen3's attention (head_dim 32) in three layers, the first dense; GLM-4.5's
    /// routing with 8 experts of 32, 3 a token, not renormalized, times 2.5; a shared expert
    /// of two experts' size.
    pub fn dots1() -> Self {
        TinyConfig {
            architecture: Architecture::Dots1,
            num_layers: 3,
            ..Self::qwen3()
        }
    }

    /// Hunyuan's MoE: Hunyuan's attention (as [`Self::hunyuan_dense`]), 6 experts of the MLP's
    /// size (transformers 5 makes them so, whatever `moe_intermediate_size` says; Hunyuan-A13B's
    /// are), 2 a token, renormalized, and a shared expert of the MLP's size.
    pub fn hunyuan_moe() -> Self {
        TinyConfig {
            architecture: Architecture::HunyuanMoe,
            ..Self::hunyuan_dense()
        }
    }

    /// gpt-oss: q/k/v and output biases, a sink per head (drawn from [-2, 2], so that some
    /// heads mostly rest), every second layer sliding over 12 positions (from the first),
    /// YaRN as Qwen3's test has it; 6 experts of 32, 2 a token, with biases and the clamped
    /// SwiGLU, weighted by the softmax over the chosen.
    pub fn gpt_oss() -> Self {
        TinyConfig {
            architecture: Architecture::GptOss,
            // The experts' width, as gpt-oss's config names it.
            intermediate_size: 32,
            sliding_window: Some(12),
            sliding_window_pattern: Some(2),
            ..Self::qwen3_yarn()
        }
    }
}
