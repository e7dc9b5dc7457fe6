//! Test fixtures shared with other crates: tiny deterministic random models written as Hugging
//! Face folders or GGUF files, a GGUF writer and reference quantizers.

mod gguf_writer;
mod kquant_enc;
mod lora;
mod quant;
mod random_model;
pub mod tiny_tokenizer;
mod transformers_cases;

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

pub use self::gguf_writer::{GgufBuilder, GgufTokenizer, model_gguf};
pub use self::lora::{LLAMA_PROJECTIONS, TinyLora};
pub use self::quant::quantize;
pub use self::random_model::{write_random_gguf, write_random_llama};
pub use self::transformers_cases::{
    TRANSFORMERS_SEED, transformers_cases, write_transformers_case,
};
pub use crate::gguf::names::{permute_rows, unpermute_rows};
pub use crate::gguf::reader::MetaValue;
pub use crate::validate::expected_tensors;
use crate::{
    Activation, Architecture, DType, GenerationDefaults, LongRope, ModelConfig, ModelError,
    RopeScaling,
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
    /// Llama 3 RoPE frequency scaling (Llama 3.1 / 3.2), written to config.json and GGUF.
    pub rope_scaling: Option<RopeScaling>,
    /// Linear RoPE scaling (Gemma 3 4B and larger: the global layers only).
    pub rope_linear_factor: Option<f32>,
    /// Mistral's sliding window, written to config.json and GGUF.
    pub sliding_window: Option<usize>,
    /// Qwen: the first layer the window applies to (`max_window_layers`).
    pub first_sliding_layer: usize,
    /// Gemma 2 and 3: every `n`th layer global (with `sliding_window` set).
    pub sliding_window_pattern: Option<usize>,
    /// Phi-3's LongRoPE, written to config.json and as GGUF's factor tensors.
    pub long_rope: Option<LongRope>,
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
            rope_linear_factor: None,
            sliding_window: None,
            first_sliding_layer: 0,
            sliding_window_pattern: None,
            long_rope: None,
            partial_rotary_dim: None,
            granite: None,
            attn_softcap: None,
            final_softcap: None,
            dtype: DType::F32,
            generation: GenerationDefaults::default(),
            chat_template: None,
            extra_special_tokens: Vec::new(),
        }
    }
}

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
            long_rope: Some(LongRope {
                short_factor: (0..half).map(|i| 1.0 + 0.1 * i as f32).collect(),
                long_factor: (0..half).map(|i| 1.0 + 1.5 * i as f32).collect(),
                original_max_position_embeddings: 64,
                attention_factor: LongRope::default_attention_factor(512, 64),
            }),
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

    /// Phi-4-mini: Phi-3 with a partial rotary embedding (12 of each head's 16 dimensions turn,
    /// its factor 0.75), LongRoPE factors for those 6 pairs, tied embeddings.
    pub fn phi4_mini() -> Self {
        let phi3 = Self::phi3();
        let r = phi3.long_rope.clone().unwrap();
        TinyConfig {
            partial_rotary_dim: Some(12),
            long_rope: Some(LongRope {
                short_factor: r.short_factor[..6].to_vec(),
                long_factor: r.long_factor[..6].to_vec(),
                ..r
            }),
            tie_word_embeddings: true,
            ..phi3
        }
    }

    /// The `ModelConfig` a loader should produce for this model.
    pub fn model_config(&self) -> ModelConfig {
        let gemma = self.architecture.is_gemma();
        let gemma3 = self.architecture == Architecture::Gemma3;
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
            rope_scaling: self.rope_scaling,
            rope_linear_factor: self.rope_linear_factor,
            long_rope: self.long_rope.clone(),
            tie_word_embeddings: self.tie_word_embeddings,
            attention_bias: self.architecture == Architecture::Qwen2,
            sliding_window: self.sliding_window,
            first_sliding_layer: self.first_sliding_layer,
            sliding_window_pattern: self.sliding_window_pattern,
            rope_local_theta: gemma3.then_some(10000.0),
            query_pre_attn_scalar: None,
            partial_rotary_dim: self.partial_rotary_dim,
            granite: self.granite,
            no_rope_layers: match self.architecture {
                Architecture::SmolLM3 => (3..self.num_layers).step_by(4).collect(),
                _ => Vec::new(),
            },
            attn_softcap: self.attn_softcap,
            final_softcap: self.final_softcap,
            norm_gain_offset: 0.0,
            activation: if gemma {
                Activation::GeluTanh
            } else {
                Activation::Silu
            },
            bos_token_id: None,
            eos_token_ids: vec![tiny_tokenizer::eos_id()],
            generation: self.generation,
        }
    }
}

/// Deterministic random tensors for `cfg` (weights ~U(-0.1, 0.1), norms ~1).
pub fn tiny_tensors(cfg: &ModelConfig, seed: u64) -> Vec<NamedTensor> {
    let mut rng = StdRng::seed_from_u64(seed);
    crate::validate::expected_tensors(cfg)
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let is_norm = name.ends_with("norm.weight");
            let data = (0..n)
                .map(|_| {
                    let r: f32 = rng.random_range(-0.1..0.1);
                    if is_norm { 1.0 + r } else { r }
                })
                .collect();
            NamedTensor { name, shape, data }
        })
        .collect()
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
    move |e| ModelError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Serializes tensors as a safetensors file in `dtype` (F32, F16 or BF16).
pub fn safetensors_bytes(tensors: &[NamedTensor], dtype: DType) -> Vec<u8> {
    let name = match dtype {
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        other => panic!("safetensors cannot hold {other:?}"),
    };
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut data = Vec::new();
    for t in tensors {
        let bytes = quantize(dtype, &t.data);
        header.insert(t.name.clone(), json!({"dtype": name, "shape": t.shape, "data_offsets": [data.len(), data.len() + bytes.len()]}));
        data.extend(bytes);
    }
    let mut h = serde_json::to_vec(&header).expect("json");
    h.resize(h.len().div_ceil(8) * 8, b' ');
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    out
}

/// Writes a tiny random model as a Hugging Face folder (config.json, model.safetensors,
/// tokenizer.json, tokenizer_config.json, generation_config.json) and returns its config.
pub fn write_tiny_llama(
    dir: &Path,
    cfg: &TinyConfig,
    seed: u64,
) -> Result<ModelConfig, ModelError> {
    let mc = write_folder_files(dir, cfg)?;
    let p = dir.join("model.safetensors");
    std::fs::write(&p, safetensors_bytes(&tiny_tensors(&mc, seed), cfg.dtype)).map_err(io(&p))?;
    Ok(mc)
}

/// Writes the same model as [`write_tiny_llama`] with its weights in `shards` files, as
/// transformers saves a large model: `model-00001-of-0000N.safetensors` and so on (tensors
/// in order, about as many in each), and `model.safetensors.index.json` mapping each tensor
/// to its file.
pub fn write_tiny_llama_sharded(
    dir: &Path,
    cfg: &TinyConfig,
    seed: u64,
    shards: usize,
) -> Result<ModelConfig, ModelError> {
    let mc = write_folder_files(dir, cfg)?;
    let tensors = tiny_tensors(&mc, seed);
    let per = tensors.len().div_ceil(shards.max(1));
    let mut map = serde_json::Map::new();
    let mut total = 0;
    for (i, part) in tensors.chunks(per).enumerate() {
        let name = format!("model-{:05}-of-{:05}.safetensors", i + 1, shards);
        for t in part {
            map.insert(t.name.clone(), json!(name));
            total += t.data.len() * cfg.dtype.byte_len(1);
        }
        let p = dir.join(&name);
        std::fs::write(&p, safetensors_bytes(part, cfg.dtype)).map_err(io(&p))?;
    }
    let index = json!({"metadata": {"total_size": total}, "weight_map": map});
    let p = dir.join("model.safetensors.index.json");
    std::fs::write(&p, serde_json::to_vec_pretty(&index).expect("json")).map_err(io(&p))?;
    Ok(mc)
}

/// The Hugging Face folder around the weights: config, tiny tokenizer, generation config.
fn write_folder_files(dir: &Path, cfg: &TinyConfig) -> Result<ModelConfig, ModelError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mc = cfg.model_config();
    // A Llama with a window is written as Mistral, whose folders carry one.
    let mistral = mc.architecture == Architecture::Llama && mc.sliding_window.is_some();
    let config = json!({
        "architectures": [match mc.architecture {
            Architecture::Llama if mistral => "MistralForCausalLM",
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
            Architecture::Gemma2 => "Gemma2ForCausalLM",
            Architecture::Gemma3 => "Gemma3ForCausalLM",
            Architecture::Phi3 => "Phi3ForCausalLM",
            Architecture::SmolLM3 => "SmolLM3ForCausalLM",
            Architecture::Granite => "GraniteForCausalLM",
        }],
        "model_type": match mc.architecture {
            Architecture::Llama if mistral => "mistral",
            Architecture::Gemma3 => "gemma3_text",
            a => a.gguf_name(),
        },
        "hidden_size": mc.hidden_size, "intermediate_size": mc.intermediate_size,
        "num_hidden_layers": mc.num_layers, "num_attention_heads": mc.num_heads,
        "num_key_value_heads": mc.num_kv_heads, "head_dim": mc.head_dim, "vocab_size": mc.vocab_size,
        "max_position_embeddings": mc.max_position_embeddings, "rms_norm_eps": mc.rms_norm_eps,
        "rope_theta": mc.rope_theta, "tie_word_embeddings": mc.tie_word_embeddings,
        "sliding_window": mc.sliding_window,
        "rope_scaling": mc.rope_scaling.map(|s| json!({
            "rope_type": "llama3", "factor": s.factor, "low_freq_factor": s.low_freq_factor,
            "high_freq_factor": s.high_freq_factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
        })),
        "attention_bias": mc.attention_bias, "hidden_act": "silu", "eos_token_id": mc.eos_token_ids[0],
        "torch_dtype": "float32",
    });
    let mut config = config;
    if let Some(f) = mc.rope_linear_factor {
        config["rope_scaling"] = json!({"rope_type": "linear", "factor": f});
    }
    if mc.architecture.is_gemma() {
        let mut extra = json!({
            "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 24,
            "sliding_window_pattern": mc.sliding_window_pattern,
            "rope_local_base_freq": mc.rope_local_theta,
            "attn_logit_softcapping": mc.attn_softcap,
            "final_logit_softcapping": mc.final_softcap,
        });
        if mc.architecture == Architecture::Gemma2 {
            // Gemma 2's folders name each layer's kind (newer transformers writes the list;
            // older folders have none and alternate).
            let kinds: Vec<&str> = (0..mc.num_layers)
                .map(|i| match mc.layer_window(i) {
                    Some(_) => "sliding_attention",
                    None => "full_attention",
                })
                .collect();
            extra["layer_types"] = json!(kinds);
            extra
                .as_object_mut()
                .unwrap()
                .remove("sliding_window_pattern");
            extra
                .as_object_mut()
                .unwrap()
                .remove("rope_local_base_freq");
        }
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
    }
    if matches!(
        mc.architecture,
        Architecture::Qwen2 | Architecture::Qwen3 | Architecture::SmolLM3
    ) && mc.sliding_window.is_some()
    {
        config["use_sliding_window"] = json!(true);
        config["max_window_layers"] = json!(mc.first_sliding_layer);
    }
    if mc.architecture == Architecture::SmolLM3 {
        // One flag a layer, 1 where it applies RoPE, as SmolLM3's folders carry it.
        let flags: Vec<u8> = (0..mc.num_layers)
            .map(|i| u8::from(!mc.no_rope_layers.contains(&i)))
            .collect();
        config["no_rope_layers"] = json!(flags);
        config["no_rope_layer_interval"] = json!(4);
    }
    if let Some(g) = mc.granite {
        config["embedding_multiplier"] = json!(g.embedding);
        config["attention_multiplier"] = json!(g.attention);
        config["residual_multiplier"] = json!(g.residual);
        config["logits_scaling"] = json!(g.logits);
    }
    if let Some(r) = mc.partial_rotary_dim {
        config["partial_rotary_factor"] = json!(r as f64 / mc.head_dim as f64);
    }
    if let Some(r) = &mc.long_rope {
        let mut scaling = json!({
            "type": "longrope", "short_factor": r.short_factor, "long_factor": r.long_factor,
        });
        let default = LongRope::default_attention_factor(
            mc.max_position_embeddings,
            r.original_max_position_embeddings,
        );
        if r.attention_factor != default {
            scaling["attention_factor"] = json!(r.attention_factor);
        }
        let extra = json!({
            "original_max_position_embeddings": r.original_max_position_embeddings,
            "rope_scaling": scaling,
        });
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
    }
    let files = [
        ("config.json", serde_json::to_vec_pretty(&config)),
        (
            "tokenizer.json",
            serde_json::to_vec(&tiny_tokenizer::tokenizer_json_with(
                &cfg.extra_special_tokens
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "tokenizer_config.json",
            serde_json::to_vec_pretty(&tiny_tokenizer::tokenizer_config_json(
                cfg.chat_template.as_deref(),
            )),
        ),
        (
            "generation_config.json",
            serde_json::to_vec_pretty(&generation_config(&mc)),
        ),
    ];
    for (name, bytes) in files {
        let p = dir.join(name);
        std::fs::write(&p, bytes.expect("json")).map_err(io(&p))?;
    }
    Ok(mc)
}

/// generation_config.json: the EOS ids and the sampling settings that are set.
fn generation_config(mc: &ModelConfig) -> serde_json::Value {
    let g = &mc.generation;
    let mut v = json!({"eos_token_id": mc.eos_token_ids});
    for (key, value) in [
        ("temperature", g.temperature.map(|x| json!(x))),
        ("top_p", g.top_p.map(|x| json!(x))),
        ("top_k", g.top_k.map(|x| json!(x))),
        ("min_p", g.min_p.map(|x| json!(x))),
        ("repetition_penalty", g.repetition_penalty.map(|x| json!(x))),
    ] {
        if let Some(x) = value {
            v[key] = x;
        }
    }
    v
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
