//! The families whose sub-layers read LayerNorms of the residual stream, on the GPU against
//! the CPU reference forward pass ([`super::reference`]'s harness), as a Hugging Face folder
//! and as GGUF: GPT-NeoX (Pythia) with its sub-layers side by side and one after the other,
//! Falcon with one LayerNorm and multi-query attention (7B) and with two and grouped
//! attention (40B), GPT-2 and StarCoder, whose positions are a learned embedding, and BLOOM
//! and MPT, whose positions are ALiBi's biases on the scores; GPT-J (Hugging Face folders
//! only: llama.cpp writes no GPT-J files).
//! (Cohere, StableLM, Nemotron, StarCoder2 and Phi-2 are in [`super::architectures`].)

use super::reference::{check_folder_and_gguf, check_model_against_reference};
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

/// Falcon 7B: one LayerNorm read by attention and an exact-GELU MLP side by side, one KV head
/// for four query heads, no biases on the products, tied embeddings; as a Hugging Face folder
/// (its own tensor names; q, k and v stored as kiln runs them, with one KV head) and as GGUF
/// (`falcon`).
#[test]
fn logits_match_cpu_reference_falcon() {
    let cfg = TinyConfig::falcon();
    check_folder_and_gguf("falcon", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Falcon);
        assert_eq!(
            (c.num_kv_heads, c.activation),
            (1, kiln_model::Activation::Gelu)
        );
        assert!(c.parallel_residual && !c.mlp_norm && !c.attention_bias);
        assert!(c.tie_word_embeddings && c.partial_rotary_dim.is_none());
    });
}

/// Falcon 40B: attention and the MLP each on a LayerNorm of its own (`ln_attn`, `ln_mlp`; GGUF
/// `attn_norm_2`), two KV heads for four query heads (each group's queries, key and value
/// together in the folder's `query_key_value`), an untied LM head.
#[test]
fn logits_match_cpu_reference_falcon_40b() {
    let cfg = TinyConfig::falcon_40b();
    check_folder_and_gguf("falcon-40b", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Falcon);
        assert_eq!(c.num_kv_heads, 2);
        assert!(c.parallel_residual && c.mlp_norm && !c.tie_word_embeddings);
    });
}

/// GPT-2: a learned embedding of each position added to the token's, no rotary embedding,
/// two LayerNorms, attention then a GELU (tanh) MLP, biases on every product, tied
/// embeddings; as a Hugging Face folder (its own names, its products stored transposed,
/// `Conv1D`) and as GGUF (`gpt2`, `position_embd`).
#[test]
fn logits_match_cpu_reference_gpt2() {
    let cfg = TinyConfig::gpt2();
    check_folder_and_gguf("gpt2", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Gpt2);
        assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
        assert!(c.fused_qkv && c.attention_bias && c.tie_word_embeddings);
        assert!(!c.parallel_residual && c.num_kv_heads == c.num_heads);
        assert!(c.layer_rope(0).inv_freq.is_empty());
    });
}

/// StarCoder (GPT-BigCode): GPT-2's model with one KV head for four query heads and an
/// untied LM head; as a Hugging Face folder (`gpt_bigcode`, products stored as kiln runs
/// them) and as GGUF (`starcoder`).
#[test]
fn logits_match_cpu_reference_starcoder() {
    let cfg = TinyConfig::starcoder();
    check_folder_and_gguf("starcoder", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Starcoder);
        assert_eq!(c.num_kv_heads, 1);
        assert!(c.fused_qkv && !c.tie_word_embeddings);
    });
}

/// BLOOM: the embeddings through a LayerNorm, ALiBi's biases on six heads (both of its
/// series of slopes), GPT-2's layer; as a Hugging Face folder (its own names, each head's q,
/// k and v together in `query_key_value`) and as GGUF (`bloom`, `token_embd_norm`).
#[test]
fn logits_match_cpu_reference_bloom() {
    let cfg = TinyConfig::bloom();
    check_folder_and_gguf("bloom", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Bloom);
        assert_eq!((c.alibi, c.num_heads), (Some(8.0), 6));
        assert!(c.fused_qkv && c.attention_bias && c.tie_word_embeddings);
        assert!(c.layer_rope(0).inv_freq.is_empty());
    });
}

/// MPT: ALiBi's biases on six heads, GPT-2's layer without a bias anywhere (LayerNorms
/// included), the exact GELU; as a Hugging Face folder (its own names) and as GGUF (`mpt`,
/// `attention.max_alibi_bias`).
#[test]
fn logits_match_cpu_reference_mpt() {
    let cfg = TinyConfig::mpt();
    check_folder_and_gguf("mpt", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Mpt);
        assert_eq!(
            (c.alibi, c.activation),
            (Some(8.0), kiln_model::Activation::Gelu)
        );
        assert!(c.fused_qkv && !c.attention_bias && c.tie_word_embeddings);
    });
}

/// GPT-J: one LayerNorm read by attention and a GELU (tanh) MLP side by side, no biases on q,
/// k, v or the attention's output, 8 of each head's 20 dimensions turning with their rotary
/// pairs side by side in the stored q and k rows (put half the rotary width apart on load),
/// an untied LM head with a bias; as a Hugging Face folder under its own names.
#[test]
fn logits_match_cpu_reference_gptj() {
    let (_dir, model) = tiny(&TinyConfig::gptj(), 7);
    let c = &model.config;
    assert_eq!(c.architecture, kiln_model::Architecture::GptJ);
    assert_eq!(
        (c.partial_rotary_dim, c.activation),
        (Some(8), kiln_model::Activation::GeluTanh)
    );
    assert!(!c.attention_bias && !c.fused_qkv && !c.tie_word_embeddings);
    assert!(model.weights.contains("lm_head.bias"));
    check_model_against_reference("gptj", &model);
}
