//! The tiny random models of each architecture and feature the tests run: [`TinyConfig`]'s
//! constructors, one for each shape a test needs (the default is a two-layer Llama).

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

    /// Cohere's Command-R: one LayerNorm before attention and the MLP side by side, rotary
    /// pairs side by side in q and k, logits multiplied by 2 (the real models' 0.0625 would
    /// shrink these random weights' logits below the tests' tolerances); tied embeddings.
    pub fn cohere() -> Self {
        let base = Self::default();
        TinyConfig {
            architecture: Architecture::Cohere,
            granite: Some(crate::GraniteScales {
                embedding: 1.0,
                attention: crate::GraniteScales::plain_attention(base.head_dim),
                residual: 1.0,
                logits: 0.5,
            }),
            tie_word_embeddings: true,
            ..base
        }
    }

    /// Command-R+: Command-R's layer with each head of q and k LayerNorm'd before it turns,
    /// with a gain for each head.
    pub fn command_r_plus() -> Self {
        TinyConfig {
            qk_layer_norm: true,
            ..Self::cohere()
        }
    }

    /// Command R7B's shape: Command-R's layer on four layers, the fourth global and without
    /// RoPE, a window of 20 on the others (a RoPE base of 100 turns fast enough that leaving
    /// out the global layer's rotation shows).
    pub fn cohere2() -> Self {
        TinyConfig {
            architecture: Architecture::Cohere2,
            num_layers: 4,
            sliding_window: Some(20),
            sliding_window_pattern: Some(4),
            rope_theta: 100.0,
            ..Self::cohere()
        }
    }

    /// StableLM: LayerNorms with biases before attention and the MLP and before the LM head,
    /// q/k/v biases, a rotary embedding on the first quarter (4) of each head's 16 dimensions
    /// (a RoPE base of 100 turns them fast enough that the partial rotation shows).
    pub fn stablelm() -> Self {
        TinyConfig {
            architecture: Architecture::StableLm,
            partial_rotary_dim: Some(4),
            rope_theta: 100.0,
            ..Default::default()
        }
    }

    /// Nemotron: StableLM's attention (without q/k/v biases) and LayerNorms, half of each
    /// head turning (a RoPE base of 100), and a MLP without a gate, relu(up x)^2.
    pub fn nemotron() -> Self {
        TinyConfig {
            architecture: Architecture::Nemotron,
            partial_rotary_dim: Some(8),
            rope_theta: 100.0,
            ..Default::default()
        }
    }

    /// StarCoder2: LayerNorms with biases, biases on every projection, a MLP without a gate
    /// activated by GELU, a window of 48 on every layer (shorter than the tests' longest
    /// prompts, long enough that a changed early token still reaches the last positions
    /// directly), tied embeddings.
    pub fn starcoder2() -> Self {
        TinyConfig {
            architecture: Architecture::Starcoder2,
            sliding_window: Some(48),
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// Phi-2: one LayerNorm with a bias read by attention and a GELU MLP side by side, biases
    /// on every product and on the LM head (an untied one), the first 40% of each head turning
    /// (8 of a head's 20 dimensions; RoPE base 100 so that the partial rotation shows), on
    /// three layers (on two, one changed early token moved the last logits too little for the
    /// GPU tests' sensitivity check).
    pub fn phi2() -> Self {
        TinyConfig {
            architecture: Architecture::Phi2,
            hidden_size: 80,
            num_heads: 4,
            num_kv_heads: 4,
            head_dim: 20,
            num_layers: 3,
            partial_rotary_dim: Some(8),
            rope_theta: 100.0,
            tie_word_embeddings: false,
            ..Default::default()
        }
    }

    /// GPT-J: Phi-2's shape without the attention's biases, 8 of each head's 20 dimensions
    /// turning with their pairs side by side in the stored q and k rows (`rotary_dim`), at
    /// GPT-J's fixed RoPE base of 10000; an untied LM head with a bias.
    pub fn gptj() -> Self {
        TinyConfig {
            architecture: Architecture::GptJ,
            rope_theta: 10000.0,
            ..Self::phi2()
        }
    }

    /// GPT-NeoX (Pythia): two LayerNorms with biases, attention and an exact-GELU MLP side by
    /// side on them, biases on every product, an untied LM head, the first quarter of each
    /// head turning (8 of 32 dimensions; RoPE base 100 so that the partial rotation shows);
    /// 128 wide (at 64 and 80, three or four layers, one changed early token moved the last
    /// logits too little for the GPU tests' sensitivity check).
    pub fn gpt_neox() -> Self {
        TinyConfig {
            architecture: Architecture::GptNeox,
            hidden_size: 128,
            num_heads: 4,
            num_kv_heads: 4,
            head_dim: 32,
            num_layers: 3,
            partial_rotary_dim: Some(8),
            rope_theta: 100.0,
            parallel_residual: true,
            ..Default::default()
        }
    }

    /// GPT-NeoX with its sub-layers one after the other (`use_parallel_residual: false`).
    pub fn gpt_neox_sequential() -> Self {
        TinyConfig {
            parallel_residual: false,
            ..Self::gpt_neox()
        }
    }

    /// Falcon 7B: one LayerNorm before attention and an exact-GELU MLP side by side,
    /// multi-query attention (one KV head for four query heads), no biases on the products,
    /// every dimension turning, tied embeddings.
    pub fn falcon() -> Self {
        TinyConfig {
            architecture: Architecture::Falcon,
            hidden_size: 128,
            num_heads: 4,
            num_kv_heads: 1,
            head_dim: 32,
            num_layers: 3,
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// Falcon 40B: the newer layer, attention and the MLP each on a LayerNorm of its own
    /// (`ln_attn`, `ln_mlp`), grouped attention (two KV heads for four query heads, each
    /// group's queries, key and value together in its folders), an untied LM head.
    pub fn falcon_40b() -> Self {
        TinyConfig {
            num_kv_heads: 2,
            mlp_norm: true,
            tie_word_embeddings: false,
            ..Self::falcon()
        }
    }

    /// GPT-2: a learned position embedding added to the token's, two LayerNorms, attention
    /// then a GELU (tanh) MLP, biases on every product, its products stored transposed in its
    /// folders (`Conv1D`); four heads of four KV heads, tied embeddings.
    pub fn gpt2() -> Self {
        TinyConfig {
            architecture: Architecture::Gpt2,
            hidden_size: 128,
            num_heads: 4,
            num_kv_heads: 4,
            head_dim: 32,
            num_layers: 3,
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// StarCoder (GPT-BigCode): GPT-2's model with multi-query attention (one KV head), its
    /// products stored as kiln runs them, an untied LM head.
    pub fn starcoder() -> Self {
        TinyConfig {
            architecture: Architecture::Starcoder,
            num_kv_heads: 1,
            tie_word_embeddings: false,
            ..Self::gpt2()
        }
    }

    /// BLOOM: the embeddings through a LayerNorm, ALiBi's biases on six heads (slopes of
    /// both of its series: four heads at the first's, two between them), GPT-2's layer,
    /// each head's q, k and v together in its folders' `query_key_value`, tied embeddings.
    pub fn bloom() -> Self {
        TinyConfig {
            architecture: Architecture::Bloom,
            hidden_size: 96,
            // (Always four times the hidden size: its configs give no width.)
            intermediate_size: 384,
            num_heads: 6,
            num_kv_heads: 6,
            head_dim: 16,
            num_layers: 3,
            // (Its configs give no context; transformers' and kiln's default.)
            max_position_embeddings: 2048,
            tie_word_embeddings: true,
            ..Default::default()
        }
    }

    /// MPT: ALiBi's biases on six heads, GPT-2's layer without any bias (its LayerNorms' too)
    /// and with the exact GELU, tied embeddings; BLOOM's shape.
    pub fn mpt() -> Self {
        TinyConfig {
            architecture: Architecture::Mpt,
            max_position_embeddings: 512,
            ..Self::bloom()
        }
    }

    /// StableLM 2 12B: StableLM's layer with each head of q and k LayerNorm'd with a gain of
    /// its own (kept a tensor a head in its folders), attention and the MLP side by side on the
    /// one LayerNorm before them.
    pub fn stablelm2_12b() -> Self {
        TinyConfig {
            qk_layer_norm: true,
            parallel_residual: true,
            ..Self::stablelm()
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
}
