//! The tiny random models of the families with LayerNorms: [`TinyConfig`]'s constructors for
//! Command-R, StableLM, Nemotron, StarCoder2, Phi-2, GPT-J, GPT-NeoX, Falcon, GPT-2, StarCoder,
//! BLOOM and MPT, most of them with attention and the MLP side by side or with their own
//! tensor names in their folders.

use super::TinyConfig;
use crate::Architecture;

impl TinyConfig {
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
}
