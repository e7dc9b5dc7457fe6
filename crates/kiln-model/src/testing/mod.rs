//! Test fixtures shared with other crates: tiny deterministic random models written as Hugging
//! Face folders or GGUF files, a GGUF writer and reference quantizers.

mod gguf_builder;
mod gguf_writer;
mod gpt_oss_folder;
mod hf_config_json;
mod hf_folder;
mod kquant_enc;
mod lora;
mod moe_config_keys;
mod native_folder;
mod quant;
mod random_model;
mod tiny_configs;
mod tiny_layer_norm_configs;
mod tiny_moe_configs;
pub mod tiny_tokenizer;
mod transformers_cases;

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use self::gguf_builder::GgufBuilder;
pub use self::gguf_writer::{GgufTokenizer, model_gguf};
use self::hf_folder::{io, write_folder_files};
pub use self::hf_folder::{safetensors_bytes, write_tiny_llama, write_tiny_llama_sharded};
pub use self::lora::{LLAMA_PROJECTIONS, TinyLora};
pub use self::quant::quantize;
pub use self::random_model::{write_random_gguf, write_random_llama};
pub use self::transformers_cases::{
    KILN_GGUF, TRANSFORMERS_SEED, transformers_cases, write_transformers_case,
};
pub use crate::gguf::names::{permute_rows, unpermute_rows};
pub use crate::gguf::reader::MetaValue;
pub use crate::validate::expected_tensors;
use crate::{
    Activation, Architecture, DType, GenerationDefaults, ModelConfig, ModelError, RopeScaling,
};

/// An HF-named f32 tensor in HF shape.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Shape of a tiny random model. `Architecture::Qwen2` gets q/k/v biases.
#[derive(Debug, Clone)]
pub struct TinyConfig {
    pub architecture: Architecture,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rope_theta: f32,
    pub rms_norm_eps: f32,
    pub tie_word_embeddings: bool,
    /// A RoPE scaling (linear, Llama 3's, LongRoPE, YaRN), written to config.json and GGUF
    /// (LongRoPE's factors as tensors).
    pub rope_scaling: Option<RopeScaling>,
    /// Mistral's sliding window, written to config.json and GGUF.
    pub sliding_window: Option<usize>,
    /// Qwen: the first layer the window applies to (`max_window_layers`).
    pub first_sliding_layer: usize,
    /// Gemma 2 and 3: every `n`th layer global (with `sliding_window` set).
    pub sliding_window_pattern: Option<usize>,
    /// Phi-4-mini's partial rotary embedding: the dimensions of a head that turn.
    pub partial_rotary_dim: Option<usize>,
    /// Granite's multipliers.
    pub granite: Option<crate::GraniteScales>,
    /// Gemma 2's soft caps on attention scores and on the logits.
    pub attn_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
    /// Safetensors element type: F32, F16 or BF16.
    pub dtype: DType,
    /// Sampling settings, written to generation_config.json and GGUF's `general.sampling.*`.
    pub generation: GenerationDefaults,
    /// The chat template; ChatML when `None`.
    pub chat_template: Option<String>,
    /// More special tokens for the Hugging Face folder's tokenizer (numbered after the tiny
    /// tokenizer's own).
    pub extra_special_tokens: Vec<String>,
    /// The mixture of experts, in place of the architecture's tiny one (full-size shapes).
    pub moe: Option<crate::Moe>,
    /// q, k and v in one matrix and bias (Phi-2's older GGUF files); GGUF only.
    pub fused_qkv: bool,
    /// Command-R+'s and StableLM 2 12B's LayerNorms of each head of q and k.
    pub qk_layer_norm: bool,
    /// StableLM 2 12B's attention and MLP side by side.
    pub parallel_residual: bool,
    /// Falcon's MLP on a LayerNorm of its own (`ln_mlp`; GPT-NeoX's always is, side by side).
    pub mlp_norm: bool,
}

impl Default for TinyConfig {
    fn default() -> Self {
        TinyConfig {
            architecture: Architecture::Llama,
            hidden_size: 64,
            intermediate_size: 160,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 16,
            vocab_size: 300,
            max_position_embeddings: 512,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-5,
            tie_word_embeddings: false,
            rope_scaling: None,
            sliding_window: None,
            first_sliding_layer: 0,
            sliding_window_pattern: None,
            partial_rotary_dim: None,
            granite: None,
            attn_softcap: None,
            final_softcap: None,
            dtype: DType::F32,
            generation: GenerationDefaults::default(),
            chat_template: None,
            extra_special_tokens: Vec::new(),
            moe: None,
            fused_qkv: false,
            qk_layer_norm: false,
            parallel_residual: false,
            mlp_norm: false,
        }
    }
}

impl TinyConfig {
    /// The `ModelConfig` a loader should produce for this model.
    pub fn model_config(&self) -> ModelConfig {
        let gemma = self.architecture.is_gemma();
        ModelConfig {
            architecture: self.architecture,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_layers: self.num_layers,
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            vocab_size: self.vocab_size,
            max_position_embeddings: self.max_position_embeddings,
            rms_norm_eps: self.rms_norm_eps,
            rope_theta: self.rope_theta,
            rope_scaling: self.rope_scaling.clone(),
            tie_word_embeddings: self.tie_word_embeddings,
            attention_bias: matches!(
                self.architecture,
                Architecture::Qwen2
                    | Architecture::Glm4
                    | Architecture::SeedOss
                    | Architecture::Qwen2Moe
                    | Architecture::Glm4Moe
                    | Architecture::GptOss
                    | Architecture::StableLm
                    | Architecture::Starcoder2
                    | Architecture::Phi2
                    | Architecture::GptNeox
                    | Architecture::Gpt2
                    | Architecture::Starcoder
                    | Architecture::Bloom
            ),
            sliding_window: self.sliding_window,
            first_sliding_layer: self.first_sliding_layer,
            sliding_window_pattern: self.sliding_window_pattern,
            rope_local_theta: match self.architecture {
                Architecture::Gemma3 => Some(10000.0),
                Architecture::Olmo2 if self.sliding_window.is_some() => Some(self.rope_theta),
                _ => None,
            },
            query_pre_attn_scalar: None,
            partial_rotary_dim: self.partial_rotary_dim,
            granite: self.granite,
            no_rope_layers: match (self.architecture, self.sliding_window_pattern) {
                (Architecture::SmolLM3, _) => (3..self.num_layers).step_by(4).collect(),
                (Architecture::Exaone4 | Architecture::Cohere2, Some(n))
                    if self.sliding_window.is_some() =>
                {
                    (0..self.num_layers).filter(|i| (i + 1) % n == 0).collect()
                }
                _ => Vec::new(),
            },
            attn_softcap: self.attn_softcap,
            final_softcap: self.final_softcap,
            norm_gain_offset: 0.0,
            fused_qkv: self.fused_qkv || self.architecture.fused_qkv(),
            qk_layer_norm: self.qk_layer_norm,
            parallel_residual: self.parallel_residual || self.architecture == Architecture::Falcon,
            alibi: matches!(self.architecture, Architecture::Bloom | Architecture::Mpt)
                .then_some(8.0),
            mlp_norm: self.mlp_norm
                || (self.architecture == Architecture::GptNeox && self.parallel_residual),
            moe: self.moe.or(match self.architecture {
                Architecture::Qwen3Moe => Some(crate::Moe::softmax(5, 2, 64, true)),
                Architecture::Mixtral => {
                    Some(crate::Moe::softmax(4, 2, self.intermediate_size, true))
                }
                Architecture::Olmoe => {
                    Some(crate::Moe::softmax(6, 3, self.intermediate_size, false))
                }
                Architecture::Qwen2Moe => Some(crate::Moe {
                    shared: Some(crate::SharedExpert {
                        intermediate_size: 192,
                        gated: true,
                    }),
                    ..crate::Moe::softmax(6, 2, 32, false)
                }),
                Architecture::Glm4Moe => Some(crate::Moe {
                    scoring: crate::Scoring::Sigmoid,
                    choice_bias: true,
                    scale: 2.5,
                    shared: Some(crate::SharedExpert {
                        intermediate_size: 32,
                        gated: false,
                    }),
                    first_layer: 1,
                    ..crate::Moe::softmax(8, 3, 32, true)
                }),
                Architecture::GraniteMoe => Some(crate::Moe {
                    shared: Some(crate::SharedExpert {
                        intermediate_size: 96,
                        gated: false,
                    }),
                    ..crate::Moe::softmax(4, 2, self.intermediate_size, true)
                }),
                Architecture::HunyuanMoe => Some(crate::Moe {
                    shared: Some(crate::SharedExpert {
                        intermediate_size: self.intermediate_size,
                        gated: false,
                    }),
                    ..crate::Moe::softmax(6, 2, self.intermediate_size, true)
                }),
                Architecture::Dots1 => Some(crate::Moe {
                    scoring: crate::Scoring::Sigmoid,
                    choice_bias: true,
                    scale: 2.5,
                    shared: Some(crate::SharedExpert {
                        intermediate_size: 64,
                        gated: false,
                    }),
                    first_layer: 1,
                    ..crate::Moe::softmax(8, 3, 32, false)
                }),
                Architecture::GptOss => Some(crate::Moe::softmax(6, 2, 32, true)),
                Architecture::Ernie45Moe => Some(crate::Moe {
                    choice_bias: true,
                    shared: Some(crate::SharedExpert {
                        intermediate_size: 64,
                        gated: false,
                    }),
                    first_layer: 1,
                    ..crate::Moe::softmax(6, 2, 32, true)
                }),
                _ => None,
            }),
            activation: match self.architecture {
                _ if gemma => Activation::GeluTanh,
                Architecture::Arcee | Architecture::Nemotron => Activation::Relu2,
                Architecture::Starcoder2
                | Architecture::Phi2
                | Architecture::GptJ
                | Architecture::Gpt2
                | Architecture::Starcoder
                | Architecture::Bloom => Activation::GeluTanh,
                Architecture::GptNeox | Architecture::Falcon | Architecture::Mpt => {
                    Activation::Gelu
                }
                Architecture::GptOss => Activation::ClampedSwiglu,
                _ => Activation::Silu,
            },
            bos_token_id: None,
            eos_token_ids: vec![tiny_tokenizer::eos_id()],
            generation: self.generation,
            text_model_of: None,
        }
    }
}

/// Deterministic random tensors for `cfg` (weights ~U(-0.1, 0.1), norms ~1; BLOOM's
/// LayerNorm of the embeddings has a gain of weights' size, so that its embeddings are as
/// small as the other models' and the layers' outputs weigh as much against them).
pub fn tiny_tensors(cfg: &ModelConfig, seed: u64) -> Vec<NamedTensor> {
    let mut rng = StdRng::seed_from_u64(seed);
    // (OLMo's files store no LayerNorm gains: the loader makes them.)
    let stored =
        |name: &str| !(cfg.architecture.norms_without_gain() && name.ends_with("norm.weight"));
    crate::validate::expected_tensors(cfg)
        .into_iter()
        .filter(|(name, _)| stored(name))
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let is_norm = name.ends_with("norm.weight") && !name.contains("embed_layernorm");
            let is_sink = name.ends_with("self_attn.sinks");
            let data = (0..n)
                .map(|_| {
                    let r: f32 = rng.random_range(-0.1..0.1);
                    match (is_norm, is_sink) {
                        (true, _) => 1.0 + r,
                        (_, true) => 20.0 * r,
                        _ => r,
                    }
                })
                .collect();
            NamedTensor { name, shape, data }
        })
        .collect()
}

/// Writes the same tiny random model (same seed → same f32 values) as a GGUF file with 2-D
/// weights stored as `dtype`; returns its config.
pub fn write_tiny_gguf(
    path: &Path,
    cfg: &TinyConfig,
    seed: u64,
    dtype: DType,
) -> Result<ModelConfig, ModelError> {
    let mc = cfg.model_config();
    let mut tokenizer = tiny_tokenizer::gguf_tokenizer();
    if let Some(t) = &cfg.chat_template {
        tokenizer.chat_template = Some(t.clone());
    }
    model_gguf(&mc, &tiny_tensors(&mc, seed), dtype, &tokenizer).write(path)?;
    Ok(mc)
}
