//! The model definitions, one file per architecture: a decoder layer's operations in the
//! order they run ([`Layer`]), each with the tensors it reads, by their Hugging Face names and
//! shapes (GGUF names are mapped onto them on load). The loader's validation, the GPU runner
//! and the CPU reference all read a model through [`ModelTensors`], so none of them spells a
//! tensor name or an order of operations, and an architecture is written down once.
//!
//! Gemma's chat template (2 and 3), for files that carry none, is here too
//! ([`GEMMA_CHAT_TEMPLATE`]).

mod arcee;
mod bloom;
mod cohere;
mod dots1;
mod ernie4_5;
mod ernie4_5_moe;
mod exaone;
mod exaone4;
mod falcon;
mod gemma2;
mod gemma3;
mod glm4;
mod glm4_moe;
pub(crate) mod gpt2;
pub(crate) mod gpt_neox;
mod gpt_oss;
mod gptj;
mod granite;
mod granite_moe;
mod hunyuan_dense;
mod hunyuan_moe;
mod internlm2;
mod layer;
mod llama;
mod minicpm;
mod mixtral;
mod mpt;
mod names;
mod native_names;
mod nemotron;
mod normed;
pub(crate) mod olmo;
mod olmo2;
mod olmoe;
mod phi2;
mod phi3;
mod qwen2;
mod qwen2_moe;
mod qwen3;
mod qwen3_moe;
mod seed_oss;
mod smollm3;
mod stablelm;
mod starcoder2;

use crate::gguf::names::Interleaved;
use crate::weights::StoredRows;
use crate::{Architecture, ModelConfig};

pub use gemma3::CHAT_TEMPLATE as GEMMA_CHAT_TEMPLATE;
pub use layer::{Buf, Experts, Layer, Op};
use names::Names;
pub(crate) use native_names::NativeNames;

/// A tensor the forward pass reads: its name and shape as Hugging Face writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
}

impl Tensor {
    fn new(name: impl Into<String>, shape: &[usize]) -> Self {
        Self {
            name: name.into(),
            shape: shape.to_vec(),
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The tensors whose rows the files of `cfg`'s architecture store in another order than kiln
/// runs them (GLM-4's, ERNIE 4.5's, Cohere's and GPT-J's q and k), each with its stored
/// layout.
pub(crate) fn interleaved_rows(cfg: &ModelConfig) -> Vec<(String, Interleaved)> {
    match cfg.architecture {
        Architecture::Glm4
        | Architecture::Ernie45
        | Architecture::Ernie45Moe
        | Architecture::Cohere
        | Architecture::Cohere2
        | Architecture::GptJ => qk_pairs_side_by_side(cfg),
        _ => Vec::new(),
    }
}

/// The q and k tensors (weights and biases, and the gains of their LayerNorms) of every layer,
/// each head's rotary pairs side by side in its first `rotary_dim` rows, in Hugging Face
/// folders and GGUF files alike.
fn qk_pairs_side_by_side(cfg: &ModelConfig) -> Vec<(String, Interleaved)> {
    let rotary = Some(cfg.rotary_dim());
    (0..cfg.num_layers)
        .flat_map(|i| {
            [("q", cfg.num_heads), ("k", cfg.num_kv_heads)]
                .into_iter()
                .flat_map(move |(p, heads)| {
                    let il = |flat| Interleaved {
                        heads,
                        rotary,
                        flat,
                    };
                    let gain = (cfg.qk_layer_norm).then(|| {
                        (
                            format!("model.layers.{i}.self_attn.{p}_norm.weight"),
                            il(true),
                        )
                    });
                    ["weight", "bias"]
                        .map(|s| {
                            (
                                format!("model.layers.{i}.self_attn.{p}_proj.{s}"),
                                il(false),
                            )
                        })
                        .into_iter()
                        .chain(gain)
                })
        })
        .collect()
}

/// How a family's Hugging Face folders differ from kiln's names and row orders: their names
/// of the tensors, and the order their fused `query_key_value` rows are stored in, where not
/// kiln's (GPT-NeoX's and Falcon's).
pub(crate) struct NativeFolder {
    pub names: &'static NativeNames,
    pub qkv: Option<StoredRows>,
}

impl NativeFolder {
    /// `cfg`'s, where its family names its tensors its own way.
    pub(crate) fn of(cfg: &ModelConfig) -> Option<Self> {
        match cfg.architecture {
            Architecture::GptNeox => Some(NativeFolder {
                names: &gpt_neox::NAMES,
                qkv: Some(StoredRows::QkvByGroup {
                    kv_heads: cfg.num_heads,
                    q_per_kv: 1,
                }),
            }),
            Architecture::Falcon => Some(NativeFolder {
                names: falcon::names(cfg),
                qkv: falcon::stored_qkv(cfg),
            }),
            Architecture::Bloom => Some(NativeFolder {
                names: &bloom::NAMES,
                qkv: Some(StoredRows::QkvByGroup {
                    kv_heads: cfg.num_heads,
                    q_per_kv: 1,
                }),
            }),
            Architecture::Mpt => Some(NativeFolder {
                names: &mpt::NAMES,
                qkv: None,
            }),
            Architecture::GptJ => Some(NativeFolder {
                names: &gptj::NAMES,
                qkv: None,
            }),
            Architecture::Exaone => Some(NativeFolder {
                names: &exaone::NAMES,
                qkv: None,
            }),
            Architecture::InternLm2 => Some(NativeFolder {
                names: &internlm2::NAMES,
                qkv: Some(StoredRows::QkvByGroup {
                    kv_heads: cfg.num_kv_heads,
                    q_per_kv: cfg.num_heads / cfg.num_kv_heads.max(1),
                }),
            }),
            // (StarCoder's multi-head models keep each head's q, k and v together.)
            Architecture::Gpt2 | Architecture::Starcoder => Some(NativeFolder {
                names: &gpt2::NAMES,
                qkv: (cfg.num_kv_heads > 1 && cfg.architecture == Architecture::Starcoder)
                    .then_some(StoredRows::QkvByGroup {
                        kv_heads: cfg.num_kv_heads,
                        q_per_kv: 1,
                    }),
            }),
            _ => None,
        }
    }

    /// Kiln's names of `cfg`'s `query_key_value` tensors (each layer's weight and bias).
    pub(crate) fn qkv_names(cfg: &ModelConfig) -> Vec<String> {
        (0..cfg.num_layers)
            .flat_map(|i| {
                ["weight", "bias"].map(|s| format!("model.layers.{i}.self_attn.qkv_proj.{s}"))
            })
            .collect()
    }
}

/// Every tensor of a model, by role.
#[derive(Debug, Clone)]
pub struct ModelTensors {
    pub embed: Tensor,
    /// The learned embedding of each position, added to the token's (GPT-2's `wpe`).
    pub positions: Option<Tensor>,
    /// The LayerNorm of the embeddings, gain and bias (BLOOM's `word_embeddings_layernorm`).
    pub embed_norm: Option<[Tensor; 2]>,
    pub layers: Vec<Layer>,
    pub final_norm: Tensor,
    /// The final LayerNorm's bias, where the architecture's norms have one (StableLM's).
    pub final_norm_bias: Option<Tensor>,
    /// The output projection; `None` when it is the embedding (tied).
    pub lm_head: Option<Tensor>,
    /// The output projection's bias, where it has one (Phi-2's, GPT-J's).
    pub lm_head_bias: Option<Tensor>,
}

impl ModelTensors {
    /// The tensors of `cfg`'s architecture and shape.
    pub fn for_config(cfg: &ModelConfig) -> Self {
        let layer = match cfg.architecture {
            Architecture::Llama => llama::layer,
            Architecture::Qwen2 => qwen2::layer,
            Architecture::Qwen3 => qwen3::layer,
            Architecture::Gemma2 => gemma2::layer,
            Architecture::Gemma3 => gemma3::layer,
            Architecture::Phi3 => phi3::layer,
            Architecture::SmolLM3 => smollm3::layer,
            Architecture::Granite => granite::layer,
            Architecture::MiniCpm => minicpm::layer,
            Architecture::Cohere | Architecture::Cohere2 => cohere::layer,
            Architecture::StableLm => stablelm::layer,
            Architecture::Nemotron => nemotron::layer,
            Architecture::Starcoder2 => starcoder2::layer,
            Architecture::Phi2 => phi2::layer,
            Architecture::GptNeox => gpt_neox::layer,
            Architecture::Falcon => falcon::layer,
            Architecture::Gpt2 | Architecture::Starcoder => gpt2::layer,
            Architecture::Bloom => bloom::layer,
            Architecture::Mpt => mpt::layer,
            Architecture::GptJ => gptj::layer,
            Architecture::InternLm2 | Architecture::Exaone => llama::layer,
            Architecture::Olmo => olmo::layer,
            Architecture::Olmo2 => olmo2::layer,
            Architecture::Exaone4 => exaone4::layer,
            Architecture::Glm4 => glm4::layer,
            Architecture::Ernie45 => ernie4_5::layer,
            Architecture::SeedOss => seed_oss::layer,
            Architecture::Arcee => arcee::layer,
            Architecture::HunyuanDense => hunyuan_dense::layer,
            Architecture::Qwen3Moe => qwen3_moe::layer,
            Architecture::Mixtral => mixtral::layer,
            Architecture::Olmoe => olmoe::layer,
            Architecture::Qwen2Moe => qwen2_moe::layer,
            Architecture::Glm4Moe => glm4_moe::layer,
            Architecture::Ernie45Moe => ernie4_5_moe::layer,
            Architecture::GraniteMoe => granite_moe::layer,
            Architecture::Dots1 => dots1::layer,
            Architecture::HunyuanMoe => hunyuan_moe::layer,
            Architecture::GptOss => gpt_oss::layer,
        };
        let (h, vocab) = (cfg.hidden_size, cfg.vocab_size);
        let norm = final_norm_name(cfg.architecture);
        let head_bias = matches!(cfg.architecture, Architecture::Phi2 | Architecture::GptJ);
        ModelTensors {
            embed: Tensor::new("model.embed_tokens.weight", &[vocab, h]),
            embed_norm: (cfg.architecture.embedding_norm()).then(|| {
                ["weight", "bias"].map(|s| Tensor::new(format!("model.embed_layernorm.{s}"), &[h]))
            }),
            positions: (cfg.architecture.learned_positions()).then(|| {
                Tensor::new(
                    "model.embed_positions.weight",
                    &[cfg.max_position_embeddings, h],
                )
            }),
            layers: (0..cfg.num_layers).map(|i| layer(cfg, i)).collect(),
            final_norm: Tensor::new(format!("{norm}.weight"), &[h]),
            final_norm_bias: (cfg.architecture.norm_bias())
                .then(|| Tensor::new(format!("{norm}.bias"), &[h])),
            lm_head: (!cfg.tie_word_embeddings).then(|| Tensor::new("lm_head.weight", &[vocab, h])),
            lm_head_bias: head_bias.then(|| Tensor::new("lm_head.bias", &[vocab])),
        }
    }

    /// Every tensor of the model.
    pub fn all(&self) -> Vec<&Tensor> {
        let mut v = vec![&self.embed];
        v.extend(&self.positions);
        v.extend(self.embed_norm.iter().flatten());
        v.extend(self.layers.iter().flat_map(Layer::tensors));
        v.push(&self.final_norm);
        v.extend(&self.final_norm_bias);
        v.extend(&self.lm_head);
        v.extend(&self.lm_head_bias);
        v
    }
}

/// The Hugging Face name of the norm before the LM head (GGUF's `output_norm`).
pub(crate) fn final_norm_name(arch: Architecture) -> &'static str {
    match arch {
        Architecture::Phi2 => "model.final_layernorm",
        _ => "model.norm",
    }
}

#[cfg(test)]
mod tests;
