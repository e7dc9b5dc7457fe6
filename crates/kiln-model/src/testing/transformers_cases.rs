//! The tiny random Hugging Face folders whose logits Hugging Face transformers computed for
//! `tests/reference/tiny-transformers.json` (`scripts/transformers_reference.py`): one per
//! architecture and per feature that changes the forward pass (RoPE scalings, windows, biases,
//! norms, soft caps, layers without RoPE, multipliers, OLMo 2's and EXAONE 4's norms), so kiln's CPU reference is checked against the implementation the models were
//! trained with, not only the GPU against kiln's own reading of it.

use std::path::Path;

use super::{TinyConfig, model_gguf, tiny_tensors, tiny_tokenizer, write_tiny_llama};
use crate::{
    Architecture, DType, Llama3Rope, LongRope, ModelConfig, ModelError, RopeScaling, Yarn,
};

/// The seed every case's weights are drawn with.
pub const TRANSFORMERS_SEED: u64 = 7;

/// Each case's name and shape. Weights are f16 (what kiln's reference rounds them to), so
/// transformers reads the same values kiln does.
pub fn transformers_cases() -> Vec<(&'static str, TinyConfig)> {
    let f16 = |c: TinyConfig| TinyConfig {
        dtype: DType::F16,
        ..c
    };
    vec![
        ("llama", TinyConfig::default()),
        (
            "llama3-rope-tied",
            TinyConfig {
                tie_word_embeddings: true,
                rope_theta: 500000.0,
                rope_scaling: Some(RopeScaling::Llama3(Llama3Rope {
                    factor: 32.0,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_max_position_embeddings: 64,
                })),
                ..TinyConfig::default()
            },
        ),
        (
            "mistral-window",
            TinyConfig {
                sliding_window: Some(30),
                ..TinyConfig::default()
            },
        ),
        ("qwen2", TinyConfig::qwen2()),
        (
            "qwen2-window",
            TinyConfig {
                sliding_window: Some(20),
                first_sliding_layer: 1,
                ..TinyConfig::qwen2()
            },
        ),
        ("qwen3", TinyConfig::qwen3()),
        ("qwen3-yarn", TinyConfig::qwen3_yarn()),
        (
            "llama-yarn-untruncated",
            TinyConfig {
                rope_scaling: Some(RopeScaling::Yarn(Yarn {
                    factor: 8.0,
                    original_max_position_embeddings: 48,
                    beta_fast: 16.0,
                    beta_slow: 2.0,
                    attention_factor: 1.3,
                    truncate: false,
                })),
                ..TinyConfig::default()
            },
        ),
        ("gemma2", TinyConfig::gemma2()),
        ("gemma3", TinyConfig::gemma3()),
        (
            "gemma3-linear-rope",
            TinyConfig {
                rope_scaling: Some(RopeScaling::Linear(8.0)),
                ..TinyConfig::gemma3()
            },
        ),
        ("smollm3-nope", TinyConfig::smollm3()),
        (
            "smollm3-nope-yarn",
            TinyConfig {
                rope_scaling: TinyConfig::qwen3_yarn().rope_scaling,
                ..TinyConfig::smollm3()
            },
        ),
        ("granite", TinyConfig::granite()),
        // Transformers has no MiniCPM: the script runs it as the Granite its keys make.
        ("minicpm-scales", TinyConfig::minicpm()),
        ("cohere-layernorm-parallel", TinyConfig::cohere()),
        ("cohere-plus-qk-layernorms", TinyConfig::command_r_plus()),
        ("cohere2-window-nope", TinyConfig::cohere2()),
        ("stablelm-layernorm-biases-partial", TinyConfig::stablelm()),
        (
            "stablelm2-12b-qk-layernorms-parallel",
            TinyConfig::stablelm2_12b(),
        ),
        ("nemotron-layernorm1p-relu2", TinyConfig::nemotron()),
        ("starcoder2-biases-gelu-window", TinyConfig::starcoder2()),
        ("phi2-parallel-gelu-head-bias", TinyConfig::phi2()),
        ("gpt-neox-parallel-exact-gelu", TinyConfig::gpt_neox()),
        ("gpt-neox-sequential", TinyConfig::gpt_neox_sequential()),
        ("falcon-7b-multi-query", TinyConfig::falcon()),
        ("falcon-40b-grouped-two-norms", TinyConfig::falcon_40b()),
        ("gpt2-learned-positions-conv1d", TinyConfig::gpt2()),
        ("starcoder-multi-query", TinyConfig::starcoder()),
        ("bloom-alibi-embedding-norm", TinyConfig::bloom()),
        ("mpt-alibi-no-biases", TinyConfig::mpt()),
        ("gptj-parallel-interleaved-partial", TinyConfig::gptj()),
        ("internlm2-grouped-wqkv", TinyConfig::internlm2()),
        ("exaone-names-llama3-rope", TinyConfig::exaone()),
        ("olmo-layernorm-without-gain", TinyConfig::olmo()),
        // `multi_query` false: each head's q, k and v together in `c_attn`.
        (
            "starcoder-multi-head",
            TinyConfig {
                num_kv_heads: 4,
                ..TinyConfig::starcoder()
            },
        ),
        ("olmo2", TinyConfig::olmo2()),
        ("olmo3-window", TinyConfig::olmo3()),
        (
            "olmo3-window-yarn",
            TinyConfig {
                rope_scaling: TinyConfig::qwen3_yarn().rope_scaling,
                ..TinyConfig::olmo3()
            },
        ),
        ("exaone4-window-nope", TinyConfig::exaone4()),
        ("glm4-partial-interleaved", TinyConfig::glm4()),
        ("ernie45-interleaved", TinyConfig::ernie45()),
        ("seed-oss-biases", TinyConfig::seed_oss()),
        ("arcee-relu2", TinyConfig::arcee()),
        ("hunyuan-dense-norm-after-rope", TinyConfig::hunyuan_dense()),
        ("qwen3-moe", TinyConfig::qwen3_moe()),
        ("mixtral", TinyConfig::mixtral()),
        ("olmoe", TinyConfig::olmoe()),
        ("qwen2-moe-gated-shared-expert", TinyConfig::qwen2_moe()),
        ("glm4-moe-sigmoid-routing", TinyConfig::glm4_moe()),
        ("ernie45-moe-biased-choice", TinyConfig::ernie45_moe()),
        ("granite-moe-shared", TinyConfig::granite_moe()),
        ("dots1", TinyConfig::dots1()),
        ("hunyuan-moe", TinyConfig::hunyuan_moe()),
        // Three layers: sliding, global, sliding.
        (
            "gpt-oss-sinks-biased-experts",
            TinyConfig {
                num_layers: 3,
                ..TinyConfig::gpt_oss()
            },
        ),
        ("phi3-longrope", TinyConfig::phi3()),
        ("phi4-mini-partial-rotary", TinyConfig::phi4_mini()),
        (
            "phi3-longrope-scaled",
            TinyConfig {
                rope_scaling: TinyConfig::phi3().rope_scaling.map(|s| match s {
                    RopeScaling::LongRope(r) => RopeScaling::LongRope(LongRope {
                        attention_factor: 1.25,
                        ..r
                    }),
                    other => other,
                }),
                ..TinyConfig::phi3()
            },
        ),
    ]
    .into_iter()
    .map(|(name, c)| (name, f16(c)))
    .collect()
}

/// The file beside a case's folder that kiln reads where it reads no folder of the
/// architecture (gpt-oss): the same values (through f16, as the folder holds them) as GGUF.
pub const KILN_GGUF: &str = "kiln.gguf";

/// Writes case `cfg` as a Hugging Face folder in `dir` (and, for gpt-oss, [`KILN_GGUF`]).
pub fn write_transformers_case(dir: &Path, cfg: &TinyConfig) -> Result<ModelConfig, ModelError> {
    let mc = write_tiny_llama(dir, cfg, TRANSFORMERS_SEED)?;
    if mc.architecture == Architecture::GptOss {
        let mut tensors = tiny_tensors(&mc, TRANSFORMERS_SEED);
        for t in &mut tensors {
            t.data
                .iter_mut()
                .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
        }
        model_gguf(&mc, &tensors, DType::F16, &tiny_tokenizer::gguf_tokenizer())
            .write(&dir.join(KILN_GGUF))?;
    }
    Ok(mc)
}
