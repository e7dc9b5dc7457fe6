//! The architecture a GGUF file's `general.architecture` names, as llama.cpp's converter
//! writes it.

use super::meta::Meta;
use crate::{Architecture, ModelError};

/// The architecture named by `general.architecture`, if kiln supports it.
pub(super) fn architecture(meta: &Meta) -> Result<(Architecture, String), ModelError> {
    let arch = meta
        .str("general.architecture")
        .unwrap_or("<missing general.architecture>");
    let experts = meta.usize(&format!("{arch}.expert_count")).unwrap_or(0);
    let a = match arch {
        // llama.cpp writes Mixtral as Llama with experts.
        "llama" if experts > 0 => Architecture::Mixtral,
        "llama" => Architecture::Llama,
        "qwen2" => Architecture::Qwen2,
        "qwen3" => Architecture::Qwen3,
        // Qwen2-VL's and Qwen2.5-VL's language model, and Qwen3-VL's, run on text: their
        // multimodal RoPE (`rope.dimension_sections`) turns a text token's pairs by its one
        // position in every section, as Qwen2's and Qwen3's RoPE turns them.
        "qwen2vl" => Architecture::Qwen2,
        "qwen3vl" => Architecture::Qwen3,
        "gemma2" => Architecture::Gemma2,
        "gemma3" => Architecture::Gemma3,
        "phi3" => Architecture::Phi3,
        "smollm3" => Architecture::SmolLM3,
        "granite" => Architecture::Granite,
        "granitemoe" => Architecture::GraniteMoe,
        "minicpm" => Architecture::MiniCpm,
        "command-r" => Architecture::Cohere,
        "cohere2" => Architecture::Cohere2,
        "stablelm" => Architecture::StableLm,
        "nemotron" => Architecture::Nemotron,
        "starcoder2" => Architecture::Starcoder2,
        "phi2" => Architecture::Phi2,
        "gptneox" => Architecture::GptNeox,
        "falcon" => Architecture::Falcon,
        "gpt2" => Architecture::Gpt2,
        "starcoder" => Architecture::Starcoder,
        "bloom" => Architecture::Bloom,
        "mpt" => Architecture::Mpt,
        "internlm2" => Architecture::InternLm2,
        "exaone" => Architecture::Exaone,
        "olmo" => Architecture::Olmo,
        "dots1" => Architecture::Dots1,
        "hunyuan-moe" => Architecture::HunyuanMoe,
        "olmo2" => Architecture::Olmo2,
        "exaone4" => Architecture::Exaone4,
        "glm4" => Architecture::Glm4,
        "ernie4_5" => Architecture::Ernie45,
        "seed_oss" => Architecture::SeedOss,
        "arcee" => Architecture::Arcee,
        "hunyuan-dense" => Architecture::HunyuanDense,
        "qwen3moe" => Architecture::Qwen3Moe,
        "olmoe" => Architecture::Olmoe,
        "qwen2moe" => Architecture::Qwen2Moe,
        "glm4moe" => Architecture::Glm4Moe,
        "ernie4_5-moe" => Architecture::Ernie45Moe,
        "gpt-oss" => Architecture::GptOss,
        "gptj" => {
            return Err(ModelError::Unsupported {
                file: meta.file.into(),
                reason: "GPT-J from GGUF (llama.cpp's converter writes no such files and its \
                         graphs run none): kiln reads GPT-J from Hugging Face folders"
                    .into(),
            });
        }
        other => {
            return Err(ModelError::UnsupportedArchitecture {
                file: meta.file.into(),
                architecture: other.into(),
            });
        }
    };
    Ok((a, arch.to_string()))
}
