//! Whole models as GGUF files for tests (`model_gguf`): a config and HF-named f32 tensors
//! written as llama.cpp's converter writes them (its metadata keys and tensor names,
//! quantized, llama.cpp's Q/K row permutation), through [`GgufBuilder`].

use super::NamedTensor;
use super::gguf_builder::GgufBuilder;
use crate::gguf::dequant::DType;
use crate::gguf::names::{hf_to_gguf_name, permute_rows};
use crate::gguf::reader::MetaValue;
use crate::{Architecture, ModelConfig, RopeScaling, Yarn};

/// Tokenizer metadata for a GGUF file (`tokenizer.ggml.*`).
#[derive(Debug, Clone, Default)]
pub struct GgufTokenizer {
    /// "gpt2" or "llama".
    pub model: String,
    /// `tokenizer.ggml.pre`, e.g. "smollm".
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    /// 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte.
    pub token_types: Vec<u32>,
    pub merges: Vec<String>,
    pub scores: Vec<f32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub add_bos: bool,
    pub chat_template: Option<String>,
}

fn strs(v: &[String]) -> MetaValue {
    MetaValue::Array(v.iter().cloned().map(MetaValue::String).collect())
}

/// The type a tensor of HF shape `shape` is stored as in a model file of `dtype`: `dtype` for
/// matrices whose rows hold whole blocks, F32 for the rest (1-D tensors), as llama.cpp does.
pub(super) fn stored_type(shape: &[usize], dtype: DType) -> DType {
    let cols = *shape.last().unwrap_or(&1);
    if shape.len() < 2 || cols % dtype.block_size() != 0 {
        DType::F32
    } else {
        dtype
    }
}

/// A builder holding a whole model: config metadata, tokenizer metadata and every tensor.
/// 2-D tensors are stored as `dtype` (F32 when rows are not a multiple of 32 for block types),
/// 1-D tensors as F32, as llama.cpp does.
pub fn model_gguf(
    cfg: &ModelConfig,
    tensors: &[NamedTensor],
    dtype: DType,
    tok: &GgufTokenizer,
) -> GgufBuilder {
    let a = cfg.architecture.gguf_name();
    let mut b = GgufBuilder::new();
    let u = |x: usize| MetaValue::U32(x as u32);
    b.meta("general.architecture", MetaValue::String(a.into()))
        .meta("general.name", MetaValue::String("kiln test model".into()))
        .meta(&format!("{a}.block_count"), u(cfg.num_layers))
        .meta(
            &format!("{a}.context_length"),
            u(cfg.max_position_embeddings),
        )
        .meta(&format!("{a}.embedding_length"), u(cfg.hidden_size))
        .meta(
            &format!("{a}.feed_forward_length"),
            u(cfg.intermediate_size),
        )
        .meta(&format!("{a}.attention.head_count"), u(cfg.num_heads))
        .meta(&format!("{a}.attention.head_count_kv"), u(cfg.num_kv_heads))
        .meta(&format!("{a}.attention.key_length"), u(cfg.head_dim))
        .meta(&format!("{a}.attention.value_length"), u(cfg.head_dim))
        .meta(
            &format!(
                "{a}.attention.{}",
                match cfg.architecture.layer_norm() {
                    true => "layer_norm_epsilon",
                    false => "layer_norm_rms_epsilon",
                }
            ),
            MetaValue::F32(cfg.rms_norm_eps),
        );
    // (llama.cpp's converter writes no RoPE keys for a model with learned positions or ALiBi.)
    if !cfg.architecture.learned_positions() && cfg.alibi.is_none() {
        b.meta(&format!("{a}.rope.dimension_count"), u(cfg.rotary_dim()))
            .meta(
                &format!("{a}.rope.freq_base"),
                MetaValue::F32(cfg.rope_theta),
            );
    }
    if let Some(w) = cfg.sliding_window {
        b.meta(&format!("{a}.attention.sliding_window"), u(w));
    }
    // (llama.cpp's converter writes MPT's ALiBi maximum; BLOOM's is its graph's.)
    if let (Architecture::Mpt, Some(max)) = (cfg.architecture, cfg.alibi) {
        b.meta(
            &format!("{a}.attention.max_alibi_bias"),
            MetaValue::F32(max),
        );
    }
    if cfg.architecture == Architecture::GptNeox {
        let key = format!("{a}.use_parallel_residual");
        b.meta(&key, MetaValue::Bool(cfg.parallel_residual));
    }
    if let Some(m) = cfg.moe {
        b.meta(&format!("{a}.expert_count"), u(m.experts))
            .meta(&format!("{a}.expert_used_count"), u(m.experts_per_token))
            .meta(
                &format!("{a}.expert_feed_forward_length"),
                u(m.intermediate_size),
            );
        match (cfg.architecture, m.shared) {
            (Architecture::HunyuanMoe, Some(s)) => {
                b.meta(&format!("{a}.expert_shared_count"), u(1)).meta(
                    &format!("{a}.expert_shared_feed_forward_length"),
                    u(s.intermediate_size),
                );
            }
            (Architecture::Qwen2Moe | Architecture::GraniteMoe, Some(s)) => {
                let key = format!("{a}.expert_shared_feed_forward_length");
                b.meta(&key, u(s.intermediate_size));
            }
            (Architecture::Ernie45Moe, shared) => {
                let count = shared.map_or(0, |s| s.intermediate_size / m.intermediate_size);
                b.meta(&format!("{a}.expert_shared_count"), u(count))
                    .meta(&format!("{a}.leading_dense_block_count"), u(m.first_layer))
                    .meta(&format!("{a}.interleave_moe_layer_step"), u(1));
            }
            (Architecture::Glm4Moe | Architecture::Dots1, shared) => {
                let count = shared.map_or(0, |s| s.intermediate_size / m.intermediate_size);
                b.meta(&format!("{a}.expert_shared_count"), u(count))
                    .meta(&format!("{a}.leading_dense_block_count"), u(m.first_layer))
                    .meta(
                        &format!("{a}.expert_weights_scale"),
                        MetaValue::F32(m.scale),
                    )
                    .meta(
                        &format!("{a}.expert_weights_norm"),
                        MetaValue::Bool(m.normalize),
                    )
                    .meta(&format!("{a}.expert_gating_func"), u(2))
                    .meta(&format!("{a}.nextn_predict_layers"), u(0));
            }
            _ => {}
        }
    }
    // As llama.cpp's converter, which writes no pattern for Gemma 2 and gpt-oss (always
    // every second layer).
    if let Some(n) = (cfg.sliding_window_pattern).filter(|_| {
        !matches!(
            cfg.architecture,
            Architecture::Gemma2 | Architecture::GptOss
        )
    }) {
        b.meta(&format!("{a}.attention.sliding_window_pattern"), u(n));
    }
    if let (Architecture::Cohere | Architecture::Cohere2, Some(g)) = (cfg.architecture, cfg.granite)
    {
        b.meta(
            &format!("{a}.logit_scale"),
            MetaValue::F32((1.0 / f64::from(g.logits)) as f32),
        );
    } else if let Some(g) = cfg.granite {
        for (key, m) in [
            ("embedding_scale", g.embedding),
            ("attention.scale", g.attention),
            ("residual_scale", g.residual),
            ("logit_scale", g.logits),
        ] {
            // llama.cpp's converter writes no attention scale for MiniCPM (the usual one).
            if !(cfg.architecture == Architecture::MiniCpm && key == "attention.scale") {
                b.meta(&format!("{a}.{key}"), MetaValue::F32(m));
            }
        }
    }
    for (key, cap) in [
        ("attn_logit_softcapping", cfg.attn_softcap),
        ("final_logit_softcapping", cfg.final_softcap),
    ] {
        if let Some(c) = cap {
            b.meta(&format!("{a}.{key}"), MetaValue::F32(c));
        }
    }
    if let Some(t) = cfg.rope_local_theta {
        b.meta(&format!("{a}.rope.freq_base_swa"), MetaValue::F32(t));
    }
    if let Some(scaling) = &cfg.rope_scaling {
        write_rope_scaling(&mut b, a, scaling);
    }
    let g = &cfg.generation;
    for (key, value) in [
        ("temp", g.temperature),
        ("top_p", g.top_p),
        ("min_p", g.min_p),
        ("penalty_repeat", g.repetition_penalty),
    ] {
        if let Some(x) = value {
            b.meta(&format!("general.sampling.{key}"), MetaValue::F32(x));
        }
    }
    if let Some(k) = g.top_k {
        b.meta("general.sampling.top_k", MetaValue::I32(k as i32));
    }
    // Like llama.cpp's converter, pad the vocabulary to the embedding size with unused tokens.
    let (mut tokens, mut types) = (tok.tokens.clone(), tok.token_types.clone());
    for i in tokens.len()..cfg.vocab_size {
        tokens.push(format!("[PAD{i}]"));
        types.push(5);
    }
    b.meta("tokenizer.ggml.model", MetaValue::String(tok.model.clone()))
        .meta("tokenizer.ggml.tokens", strs(&tokens))
        .meta(
            "tokenizer.ggml.token_type",
            MetaValue::Array(types.iter().map(|&t| MetaValue::I32(t as i32)).collect()),
        )
        .meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(tok.add_bos));
    if let Some(p) = &tok.pre {
        b.meta("tokenizer.ggml.pre", MetaValue::String(p.clone()));
    }
    if !tok.merges.is_empty() {
        b.meta("tokenizer.ggml.merges", strs(&tok.merges));
    }
    if !tok.scores.is_empty() {
        b.meta(
            "tokenizer.ggml.scores",
            MetaValue::Array(tok.scores.iter().map(|&s| MetaValue::F32(s)).collect()),
        );
    }
    for (key, v) in [
        ("tokenizer.ggml.bos_token_id", tok.bos),
        ("tokenizer.ggml.eos_token_id", tok.eos),
    ] {
        if let Some(id) = v {
            b.meta(key, MetaValue::U32(id));
        }
    }
    if let Some(t) = &tok.chat_template {
        b.meta("tokenizer.chat_template", MetaValue::String(t.clone()));
    }
    for t in &stack_experts(tensors) {
        let gname = hf_to_gguf_name(&t.name, cfg.architecture);
        let heads = match (cfg.architecture.gguf_permutes_qk(), &gname) {
            (true, n) if n.contains(".attn_q.") => Some(cfg.num_heads),
            (true, n) if n.contains(".attn_k.") => Some(cfg.num_kv_heads),
            _ => None,
        };
        let data = match heads {
            Some(h) => permute_rows(&t.data, t.shape[0], h),
            None => t.data.clone(),
        };
        // Qwen2 MoE's shared expert's gate and ERNIE 4.5's choice biases, one row each, are
        // vectors in llama.cpp's files.
        let shape = match t.shape.as_slice() {
            [1, _] if gname.ends_with("_shexp.weight") || gname.ends_with("exp_probs_b.bias") => {
                &t.shape[1..]
            }
            _ => &t.shape[..],
        };
        b.tensor(&gname, shape, &data, stored_type(shape, dtype));
    }
    b
}

/// `tensors` with each layer's experts' matrices of a kind stacked into one tensor of three
/// dimensions (`mlp.experts.gate_proj.weight`: experts x rows x columns), in expert order, as
/// llama.cpp's converter stacks them.
fn stack_experts(tensors: &[NamedTensor]) -> Vec<NamedTensor> {
    let mut out: Vec<NamedTensor> = Vec::new();
    for t in tensors {
        let Some((layer, rest)) = t.name.split_once(".experts.") else {
            out.push(t.clone());
            continue;
        };
        let (_, part) = rest.split_once('.').expect("experts.{e}.{part}");
        let name = format!("{layer}.experts.{part}");
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.shape[0] += 1;
                s.data.extend(&t.data);
            }
            None => out.push(NamedTensor {
                name,
                shape: [&[1], &t.shape[..]].concat(),
                data: t.data.clone(),
            }),
        }
    }
    out
}

/// A RoPE scaling as llama.cpp's converter writes it: `rope.scaling.*` keys, LongRoPE's
/// factors as tensors.
fn write_rope_scaling(b: &mut GgufBuilder, a: &str, scaling: &RopeScaling) {
    let (kind, values): (&str, Vec<(&str, f32)>) = match scaling {
        RopeScaling::Linear(f) => ("linear", vec![("factor", *f)]),
        RopeScaling::Llama3(s) => (
            "llama3",
            vec![
                ("factor", s.factor),
                ("low_freq_factor", s.low_freq_factor),
                ("high_freq_factor", s.high_freq_factor),
            ],
        ),
        RopeScaling::LongRope(r) => {
            let half = [r.short_factor.len()];
            b.tensor(
                "rope_factors_short.weight",
                &half,
                &r.short_factor,
                DType::F32,
            );
            b.tensor(
                "rope_factors_long.weight",
                &half,
                &r.long_factor,
                DType::F32,
            );
            ("", vec![("attn_factor", r.attention_factor)])
        }
        RopeScaling::Yarn(y) => {
            assert!(y.truncate, "GGUF has no YaRN without a truncated ramp");
            let default = Yarn::mscale(y.factor as f64, 1.0) as f32;
            (
                "yarn",
                vec![
                    ("factor", y.factor),
                    ("yarn_beta_fast", y.beta_fast),
                    ("yarn_beta_slow", y.beta_slow),
                    ("yarn_attn_factor", y.attention_factor / default),
                ],
            )
        }
    };
    let original = match scaling {
        RopeScaling::Linear(_) => None,
        RopeScaling::Llama3(s) => Some(s.original_max_position_embeddings),
        RopeScaling::LongRope(r) => Some(r.original_max_position_embeddings),
        RopeScaling::Yarn(y) => Some(y.original_max_position_embeddings),
    };
    if !kind.is_empty() {
        b.meta(
            &format!("{a}.rope.scaling.type"),
            MetaValue::String(kind.into()),
        );
    }
    for (key, value) in values {
        b.meta(&format!("{a}.rope.scaling.{key}"), MetaValue::F32(value));
    }
    if let Some(o) = original {
        b.meta(
            &format!("{a}.rope.scaling.original_context_length"),
            MetaValue::U32(o as u32),
        );
    }
}
