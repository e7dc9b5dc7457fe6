//! The families whose sub-layers read LayerNorms of the residual stream, on the GPU against
//! the CPU reference forward pass ([`super::reference`]'s harness), as a Hugging Face folder
//! and as GGUF: GPT-NeoX (Pythia) with its sub-layers side by side and one after the other.
//! (Cohere, StableLM, Nemotron, StarCoder2 and Phi-2 are in [`super::architectures`].)

use super::reference::check_folder_and_gguf;
use super::*;

/// GPT-NeoX as Pythia is: two LayerNorms with biases taken of the same residual stream,
/// attention and an exact-GELU MLP side by side on them, biases on every product, 8 of each
/// head's 32 dimensions turning; as a Hugging Face folder (its own tensor names, each head's
/// q, k and v together in `query_key_value`, put in kiln's order on load) and as GGUF
/// (`gptneox`, q, k and v in `attn_qkv` one after the other, as llama.cpp's converter writes
/// them).
#[test]
fn logits_match_cpu_reference_gpt_neox() {
    let cfg = TinyConfig::gpt_neox();
    check_folder_and_gguf("gpt-neox", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::GptNeox);
        assert_eq!(c.activation, kiln_model::Activation::Gelu);
        assert!(c.parallel_residual && c.fused_qkv && c.attention_bias);
        assert_eq!(c.partial_rotary_dim, Some(8));
    });
}

/// GPT-NeoX with `use_parallel_residual: false`: the MLP reads the second LayerNorm of the
/// stream attention has added to.
#[test]
fn logits_match_cpu_reference_gpt_neox_sequential() {
    let cfg = TinyConfig::gpt_neox_sequential();
    check_folder_and_gguf("gpt-neox-sequential", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::GptNeox);
        assert!(!c.parallel_residual);
    });
}
