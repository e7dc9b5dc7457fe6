//! GGUF metadata (`{arch}.block_count`, `{arch}.attention.head_count`, ...) → [`ModelConfig`].

use super::architecture::architecture;
// (Under this path too for the LoRA adapters' reader.)
pub(crate) use super::meta::Meta;
use super::reader::MetaValue;
use super::rope::rope_scaling;
use crate::config::{GraniteScales, ModelConfig};
use crate::{Activation, Architecture, ModelError};

/// Tensor facts the config needs but metadata does not carry.
pub(crate) struct TensorFacts {
    pub has_output: bool,
    pub has_q_bias: bool,
    /// `blk.0.attn_qkv.weight`: q, k and v in one tensor.
    pub fused_qkv: bool,
    /// `blk.0.attn_q_norm.weight`: q (and k) normalized per head.
    pub has_q_norm: bool,
    /// `blk.0.ffn_norm.weight`: a norm of its own before the MLP.
    pub has_ffn_norm: bool,
    /// `blk.0.attn_norm_2.weight`: Falcon 40B's LayerNorm before its MLP (`ln_mlp`).
    pub has_attn_norm_2: bool,
    pub embed_rows: Option<usize>,
}

pub(crate) fn config_from_meta(
    meta: &Meta,
    facts: &TensorFacts,
) -> Result<ModelConfig, ModelError> {
    let (architecture, a) = architecture(meta)?;
    let hidden_size = meta.req_usize(&format!("{a}.embedding_length"))?;
    let num_heads = meta.req_usize(&format!("{a}.attention.head_count"))?;
    let head_dim = meta
        .usize(&format!("{a}.attention.key_length"))
        .unwrap_or(hidden_size / num_heads.max(1));
    // A partial rotary embedding: Phi-3's (Phi-4-mini) and GLM-4's turn the first `rot`
    // dimensions of a head; the other families' graphs turn all of them.
    let partial_rotary_dim = match meta.usize(&format!("{a}.rope.dimension_count")) {
        Some(rot) if rot != head_dim && architecture.partial_rotary() => Some(rot),
        Some(rot) if rot != head_dim => {
            return Err(ModelError::Unsupported {
                file: meta.file.into(),
                reason: format!(
                    "partial rotary embedding (rope.dimension_count {rot} != head_dim {head_dim}) on {a}"
                ),
            });
        }
        _ => None,
    };
    // The embedding's row count is what the forward pass needs; llama.cpp's converter pads the
    // token list to it, so both agree in real files.
    let vocab_size = facts
        .embed_rows
        .or_else(|| {
            meta.get("tokenizer.ggml.tokens")
                .and_then(MetaValue::as_array)
                .map(|t| t.len())
        })
        .or_else(|| meta.usize(&format!("{a}.vocab_size")))
        .ok_or_else(|| {
            ModelError::config(
                meta.file,
                "cannot determine vocab size (no tokenizer.ggml.tokens)",
            )
        })?;
    let mut eos = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if let Some(id) = meta.usize(key) {
            if !eos.contains(&(id as u32)) {
                eos.push(id as u32);
            }
        }
    }
    // gpt-oss's vocabulary: a reply ends at `<|return|>` or `<|call|>`, and goes on past
    // `<|end|>`, which ends one of its messages (its reasoning, before the answer), whatever
    // end-of-turn the file names (llama.cpp's converter names `<|end|>`).
    let tokens: Vec<&str> = (meta.get("tokenizer.ggml.tokens"))
        .and_then(MetaValue::as_array)
        .map(|t| t.iter().filter_map(MetaValue::as_str).collect())
        .unwrap_or_default();
    if crate::tokenizer::gguf_bpe::is_harmony(&tokens) {
        let id = |m: &str| tokens.iter().position(|t| *t == m).map(|i| i as u32);
        eos.retain(|&e| Some(e) != id("<|end|>"));
        for stop in ["<|return|>", "<|call|>"].into_iter().filter_map(id) {
            if !eos.contains(&stop) {
                eos.push(stop);
            }
        }
    }
    let gemma = architecture.is_gemma();
    let gemma3 = architecture == Architecture::Gemma3;
    // Gemma 2 keeps its soft caps in the metadata (llama.cpp's converter writes both).
    let cap = |key: &str| {
        (architecture == Architecture::Gemma2)
            .then(|| meta.f64(&format!("{a}.{key}")))
            .flatten()
            .map(|c| c as f32)
    };
    // GLM-4.5's blocks include its multi-token-prediction layers after the last, which a
    // forward pass does not run.
    let num_layers = (meta.req_usize(&format!("{a}.block_count"))?).saturating_sub(
        meta.usize(&format!("{a}.nextn_predict_layers"))
            .unwrap_or(0),
    );
    // OLMo 3's files are `olmo2` with a window on three layers of four (llama.cpp's fixed
    // pattern); its sliding layers turn unscaled, which kiln has not checked against
    // llama.cpp's reading of a scaled file.
    let olmo3 = architecture == Architecture::Olmo2
        && meta
            .usize(&format!("{a}.attention.sliding_window"))
            .is_some();
    if olmo3
        && meta
            .str(&format!("{a}.rope.scaling.type"))
            .is_some_and(|t| t != "none")
    {
        return Err(ModelError::Unsupported {
            file: meta.file.into(),
            reason: "OLMo 3 (olmo2 with a sliding window) with a RoPE scaling".into(),
        });
    }
    // GLM-4V's language model is `glm4` with M-RoPE (positions in sections, q and k rows in
    // another order), which kiln does not run.
    if architecture == Architecture::Glm4
        && meta.get(&format!("{a}.rope.dimension_sections")).is_some()
    {
        return Err(ModelError::Unsupported {
            file: meta.file.into(),
            reason: "GLM-4V's multimodal RoPE (glm4.rope.dimension_sections)".into(),
        });
    }
    // An attention scale other than 1/sqrt(head_dim) (llama.cpp's graphs read one for Seed-OSS
    // and a few others) is Granite's multiplier or a scale kiln does not run.
    if let Some(scale) = meta.f64(&format!("{a}.attention.scale"))
        && !matches!(
            architecture,
            Architecture::Granite | Architecture::GraniteMoe
        )
        && (scale * (head_dim as f64).sqrt() - 1.0).abs() > 1e-6
    {
        return Err(ModelError::Unsupported {
            file: meta.file.into(),
            reason: format!("attention scale {scale} ({a}.attention.scale) on {a}"),
        });
    }
    // llama.cpp runs EXAONE 4's windows on its 64-layer (32B) size only: 4096 positions unless
    // the file says, every 4th layer global and without RoPE.
    let exaone_windowed = architecture == Architecture::Exaone4 && num_layers == 64;
    // Command R7B's, as llama.cpp runs it: three sliding layers to one global without RoPE.
    let cohere2 = architecture == Architecture::Cohere2;
    if cohere2
        && meta
            .usize(&format!("{a}.attention.sliding_window"))
            .is_none()
    {
        return Err(ModelError::config(
            meta.file,
            format!("{a} without {a}.attention.sliding_window"),
        ));
    }
    // Clipping of q, k and v (MPT's, OLMo 1.7's), which kiln does not run.
    if let Some(c) = meta.f64(&format!("{a}.attention.clamp_kqv")) {
        return Err(ModelError::Unsupported {
            file: meta.file.into(),
            reason: format!("q, k and v clipped at {c} ({a}.attention.clamp_kqv)"),
        });
    }
    let rope_theta = meta.f64(&format!("{a}.rope.freq_base")).unwrap_or(10000.0) as f32;
    let cfg = ModelConfig {
        architecture,
        hidden_size,
        intermediate_size: meta.req_usize(&format!("{a}.feed_forward_length"))?,
        num_layers,
        num_heads,
        num_kv_heads: meta
            .usize(&format!("{a}.attention.head_count_kv"))
            .unwrap_or(num_heads),
        head_dim,
        vocab_size,
        max_position_embeddings: meta.usize(&format!("{a}.context_length")).unwrap_or(2048),
        // Cohere's LayerNorm's, under llama.cpp's name for a LayerNorm's.
        rms_norm_eps: meta
            .f64(&format!(
                "{a}.attention.{}",
                match architecture.layer_norm() {
                    true => "layer_norm_epsilon",
                    false => "layer_norm_rms_epsilon",
                }
            ))
            .unwrap_or(1e-5) as f32,
        rope_theta,
        // Llama 3's divisors and Phi-3's LongRoPE factors are tensors; the loader reads them.
        rope_scaling: rope_scaling(meta, &a)?,
        tie_word_embeddings: !facts.has_output,
        // Phi-2's products always have biases (fused with q, k and v's in older files).
        attention_bias: facts.has_q_bias || architecture == Architecture::Phi2,
        sliding_window: match architecture {
            Architecture::Exaone4 => exaone_windowed.then(|| {
                meta.usize(&format!("{a}.attention.sliding_window"))
                    .unwrap_or(4096)
            }),
            _ => meta.usize(&format!("{a}.attention.sliding_window")),
        },
        first_sliding_layer: 0,
        // llama.cpp's converter writes neither Gemma's interleaving (Gemma 2: every 2nd layer
        // global, Gemma 3: every 6th) nor Gemma 3's sliding layers' RoPE base (10000); the 27B
        // sizes scale queries by hidden / heads instead of head_dim (the size is told by its
        // layers: 46 for Gemma 2, 62 for Gemma 3).
        sliding_window_pattern: match gemma {
            true => Some(
                meta.usize(&format!("{a}.attention.sliding_window_pattern"))
                    .unwrap_or(if gemma3 { 6 } else { 2 }),
            ),
            // gpt-oss's: every second layer slides, from the first (llama.cpp's fixed pattern).
            false if architecture == Architecture::GptOss => Some(2),
            false => (exaone_windowed || olmo3 || cohere2).then_some(4),
        },
        rope_local_theta: match (gemma3, olmo3) {
            (true, _) => Some(
                meta.f64(&format!("{a}.rope.freq_base_swa"))
                    .unwrap_or(10000.0) as f32,
            ),
            (_, true) => Some(
                meta.f64(&format!("{a}.rope.freq_base_swa"))
                    .map_or(rope_theta, |t| t as f32),
            ),
            _ => None,
        },
        query_pre_attn_scalar: (gemma && num_layers == if gemma3 { 62 } else { 46 })
            .then(|| (hidden_size / num_heads.max(1)) as f32),
        // llama.cpp's converter writes no key for SmolLM3's layers without RoPE: its graph
        // leaves out every fourth, as the released models do.
        partial_rotary_dim,
        // Granite's multipliers as llama.cpp's converter writes them (MiniCPM's too, worked out
        // from its config's keys); without an attention scale llama.cpp's graph scales by
        // 1/sqrt(head_dim), as MiniCPM's files always have it.
        granite: match architecture {
            // Cohere's logits are multiplied by its `logit_scale` (Granite's divided).
            Architecture::Cohere | Architecture::Cohere2 => Some(GraniteScales {
                embedding: 1.0,
                attention: GraniteScales::plain_attention(head_dim),
                residual: 1.0,
                logits: (1.0 / meta.f64(&format!("{a}.logit_scale")).unwrap_or(0.0625)) as f32,
            }),
            _ => matches!(
                architecture,
                Architecture::Granite | Architecture::GraniteMoe | Architecture::MiniCpm
            )
            .then(|| {
                let m =
                    |k: &str, default: f64| meta.f64(&format!("{a}.{k}")).unwrap_or(default) as f32;
                GraniteScales {
                    embedding: m("embedding_scale", 1.0),
                    attention: m(
                        "attention.scale",
                        GraniteScales::plain_attention(head_dim).into(),
                    ),
                    residual: m("residual_scale", 1.0),
                    logits: m("logit_scale", 1.0),
                }
            }),
        },
        no_rope_layers: match architecture {
            Architecture::SmolLM3 => (3..num_layers).step_by(4).collect(),
            Architecture::Exaone4 if exaone_windowed => (3..num_layers).step_by(4).collect(),
            Architecture::Cohere2 => (3..num_layers).step_by(4).collect(),
            _ => Vec::new(),
        },
        attn_softcap: cap("attn_logit_softcapping"),
        final_softcap: cap("final_logit_softcapping"),
        norm_gain_offset: 0.0,
        // (Phi-2's older files fuse them too.)
        fused_qkv: facts.fused_qkv
            && (architecture == Architecture::Phi2 || architecture.fused_qkv()),
        // Command-R+'s and StableLM 2 12B's per-head LayerNorms (a `cohere2` file with them is
        // refused, its norms being tensors its forward pass does not read); StableLM 2 12B's
        // MLP reads the norm attention reads, as llama.cpp runs a `stablelm` file without
        // `ffn_norm`.
        qk_layer_norm: facts.has_q_norm
            && matches!(architecture, Architecture::Cohere | Architecture::StableLm),
        // GPT-NeoX's side by side unless the file says not (`use_parallel_residual`); Falcon's
        // always, the MLP on a LayerNorm of its own where the file has one (`attn_norm_2`).
        // BLOOM's, at the bias maximum llama.cpp runs it with (8; its files carry none);
        // MPT's, at its files' `attention.max_alibi_bias`.
        alibi: match architecture {
            Architecture::Bloom => Some(8.0),
            Architecture::Mpt => Some(
                meta.f64(&format!("{a}.attention.max_alibi_bias"))
                    .unwrap_or(8.0) as f32,
            ),
            _ => None,
        },
        mlp_norm: match architecture {
            Architecture::Falcon => facts.has_attn_norm_2,
            Architecture::GptNeox => {
                meta.get(&format!("{a}.use_parallel_residual"))
                    .and_then(MetaValue::as_bool)
                    != Some(false)
            }
            _ => false,
        },
        parallel_residual: match architecture {
            Architecture::Falcon => true,
            Architecture::StableLm => !facts.has_ffn_norm,
            Architecture::GptNeox => {
                meta.get(&format!("{a}.use_parallel_residual"))
                    .and_then(MetaValue::as_bool)
                    != Some(false)
            }
            _ => false,
        },
        moe: super::moe::moe(meta, architecture)?,
        activation: match architecture {
            _ if gemma => Activation::GeluTanh,
            Architecture::Starcoder2
            | Architecture::Phi2
            | Architecture::Gpt2
            | Architecture::Starcoder
            | Architecture::Bloom => Activation::GeluTanh,
            // (GPT-NeoX's and Falcon's files do not say which GELU; their models were trained
            // with the exact one.)
            Architecture::GptNeox | Architecture::Falcon | Architecture::Mpt => Activation::Gelu,
            Architecture::Arcee | Architecture::Nemotron => Activation::Relu2,
            Architecture::GptOss => Activation::ClampedSwiglu,
            _ => Activation::Silu,
        },
        bos_token_id: meta.usize("tokenizer.ggml.bos_token_id").map(|v| v as u32),
        eos_token_ids: eos,
        generation: crate::GenerationDefaults::from_gguf(|k| meta.f64(k)),
        // (llama.cpp keeps a VL model's vision tower in a file of its own.)
        text_model_of: (a == "qwen2vl" || a == "qwen3vl").then(|| a.clone()),
    };
    cfg.validate(meta.file)?;
    Ok(cfg)
}
