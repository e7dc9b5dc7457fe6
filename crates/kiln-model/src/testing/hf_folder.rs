//! Tiny random models as Hugging Face folders: config.json as each architecture writes it,
//! the weights in safetensors (one file or shards with their index), the tiny tokenizer and
//! the generation config.

use std::path::Path;

use serde_json::json;

use super::{NamedTensor, TinyConfig, quantize, tiny_tensors, tiny_tokenizer};
use crate::{
    Activation, Architecture, DType, LongRope, ModelConfig, ModelError, RopeScaling, Yarn,
};

pub(super) fn io(path: &Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
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
    std::fs::write(&p, safetensors_bytes(&folder_tensors(&mc, seed), cfg.dtype)).map_err(io(&p))?;
    Ok(mc)
}

/// The tiny model's tensors as its architecture's folders hold them: Granite's MoE with each
/// layer's experts stacked (`block_sparse_moe.input_linear`: every expert's gate rows, then
/// its up rows; `output_linear`) and its shared expert's gate and up in one matrix
/// (`shared_mlp.input_linear`); gpt-oss's as transformers saves them
/// ([`super::gpt_oss_folder`]); StableLM 2 12B's q/k LayerNorm gains a tensor a head
/// (`q_layernorm.norms.{h}`); every other architecture's as kiln names them.
fn folder_tensors(mc: &ModelConfig, seed: u64) -> Vec<NamedTensor> {
    let tensors = tiny_tensors(mc, seed);
    match mc.architecture {
        Architecture::GraniteMoe => {}
        Architecture::GptOss => return super::gpt_oss_folder::folder_tensors(mc, tensors),
        Architecture::GptNeox
        | Architecture::Falcon
        | Architecture::Gpt2
        | Architecture::Starcoder
        | Architecture::Bloom
        | Architecture::Mpt
        | Architecture::GptJ => {
            return super::native_folder::folder_tensors(mc, tensors);
        }
        Architecture::StableLm if mc.qk_layer_norm => return per_head_gains(tensors),
        _ => return tensors,
    }
    let take = |name: &str| -> NamedTensor {
        (tensors.iter().find(|t| t.name == name).cloned()).expect("the layer's tensor")
    };
    let stack = |name: String, shape: Vec<usize>, parts: Vec<NamedTensor>| NamedTensor {
        name,
        shape,
        data: parts.into_iter().flat_map(|t| t.data).collect(),
    };
    let (h, moe) = (mc.hidden_size, mc.moe.expect("experts"));
    let ff = moe.intermediate_size;
    let mut out: Vec<NamedTensor> = (tensors.iter())
        .filter(|t| !t.name.contains(".experts.") && !t.name.contains(".shared_mlp."))
        .cloned()
        .collect();
    for i in 0..mc.num_layers {
        let l = format!("model.layers.{i}");
        let expert = |e: usize, kind: &str| {
            take(&format!(
                "{l}.block_sparse_moe.experts.{e}.{kind}_proj.weight"
            ))
        };
        let gate_up = (0..moe.experts).flat_map(|e| [expert(e, "gate"), expert(e, "up")]);
        out.push(stack(
            format!("{l}.block_sparse_moe.input_linear.weight"),
            vec![moe.experts, 2 * ff, h],
            gate_up.collect(),
        ));
        out.push(stack(
            format!("{l}.block_sparse_moe.output_linear.weight"),
            vec![moe.experts, h, ff],
            (0..moe.experts).map(|e| expert(e, "down")).collect(),
        ));
        if let Some(s) = moe.shared {
            let shared = |kind: &str| take(&format!("{l}.shared_mlp.{kind}_proj.weight"));
            let (s, name) = (s.intermediate_size, |p: &str| {
                format!("{l}.shared_mlp.{p}.weight")
            });
            out.push(stack(
                name("input_linear"),
                vec![2 * s, h],
                vec![shared("gate"), shared("up")],
            ));
            out.push(stack(
                name("output_linear"),
                vec![h, s],
                vec![shared("down")],
            ));
        }
    }
    out
}

/// Each `[heads, head_dim]` q/k LayerNorm gain split into a tensor a head, as StableLM's
/// folders keep them.
fn per_head_gains(tensors: Vec<NamedTensor>) -> Vec<NamedTensor> {
    (tensors.into_iter())
        .flat_map(|t| {
            let per_head = ["q", "k"].into_iter().find_map(|p| {
                let suffix = format!(".self_attn.{p}_norm.weight");
                t.name.strip_suffix(&suffix).map(|l| (l.to_string(), p))
            });
            let Some((layer, p)) = per_head else {
                return vec![t];
            };
            let d = t.shape[1];
            (t.data.chunks(d).enumerate())
                .map(|(h, g)| NamedTensor {
                    name: format!("{layer}.self_attn.{p}_layernorm.norms.{h}.weight"),
                    shape: vec![d],
                    data: g.to_vec(),
                })
                .collect()
        })
        .collect()
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
    let tensors = folder_tensors(&mc, seed);
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

/// The NTK alpha of tiny Hunyuan folders.
const HUNYUAN_ALPHA: f64 = 4.0;

/// The Hugging Face folder around the weights: config, tiny tokenizer, generation config.
pub(super) fn write_folder_files(dir: &Path, cfg: &TinyConfig) -> Result<ModelConfig, ModelError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mc = cfg.model_config();
    // A Llama with a window is written as Mistral, whose folders carry one.
    let mistral = mc.architecture == Architecture::Llama && mc.sliding_window.is_some();
    // A Granite MoE with a shared expert as GraniteMoeShared.
    let shared = mc.moe.is_some_and(|m| m.shared.is_some());
    // And an OLMo 2 with windows as OLMo 3.
    let windowed = mc.sliding_window.is_some();
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
            Architecture::MiniCpm => "MiniCPMForCausalLM",
            Architecture::Cohere => "CohereForCausalLM",
            Architecture::Cohere2 => "Cohere2ForCausalLM",
            Architecture::StableLm => "StableLmForCausalLM",
            Architecture::Nemotron => "NemotronForCausalLM",
            Architecture::Starcoder2 => "Starcoder2ForCausalLM",
            Architecture::Phi2 => "PhiForCausalLM",
            Architecture::GptNeox => "GPTNeoXForCausalLM",
            Architecture::Falcon => "FalconForCausalLM",
            Architecture::Gpt2 => "GPT2LMHeadModel",
            Architecture::Starcoder => "GPTBigCodeForCausalLM",
            Architecture::Bloom => "BloomForCausalLM",
            Architecture::Mpt => "MptForCausalLM",
            Architecture::GptJ => "GPTJForCausalLM",
            Architecture::Olmo2 if windowed => "Olmo3ForCausalLM",
            Architecture::Olmo2 => "Olmo2ForCausalLM",
            Architecture::Exaone4 => "Exaone4ForCausalLM",
            Architecture::Glm4 => "Glm4ForCausalLM",
            Architecture::Ernie45 => "Ernie4_5ForCausalLM",
            Architecture::SeedOss => "SeedOssForCausalLM",
            Architecture::Arcee => "ArceeForCausalLM",
            Architecture::HunyuanDense => "HunYuanDenseV1ForCausalLM",
            Architecture::Qwen3Moe => "Qwen3MoeForCausalLM",
            Architecture::Mixtral => "MixtralForCausalLM",
            Architecture::Olmoe => "OlmoeForCausalLM",
            Architecture::Qwen2Moe => "Qwen2MoeForCausalLM",
            Architecture::Glm4Moe => "Glm4MoeForCausalLM",
            Architecture::Ernie45Moe => "Ernie4_5_MoeForCausalLM",
            Architecture::GraniteMoe if shared => "GraniteMoeSharedForCausalLM",
            Architecture::GraniteMoe => "GraniteMoeForCausalLM",
            Architecture::Dots1 => "Dots1ForCausalLM",
            Architecture::HunyuanMoe => "HunYuanMoEV1ForCausalLM",
            Architecture::GptOss => "GptOssForCausalLM",
        }],
        "model_type": match mc.architecture {
            Architecture::Llama if mistral => "mistral",
            Architecture::Olmo2 if windowed => "olmo3",
            Architecture::Gemma3 => "gemma3_text",
            Architecture::HunyuanDense => "hunyuan_v1_dense",
            Architecture::HunyuanMoe => "hunyuan_v1_moe",
            Architecture::Qwen3Moe => "qwen3_moe",
            Architecture::Mixtral => "mixtral",
            Architecture::Qwen2Moe => "qwen2_moe",
            Architecture::Glm4Moe => "glm4_moe",
            Architecture::Ernie45Moe => "ernie4_5_moe",
            Architecture::GptOss => "gpt_oss",
            Architecture::Cohere => "cohere",
            Architecture::Phi2 => "phi",
            Architecture::GptNeox => "gpt_neox",
            Architecture::Starcoder => "gpt_bigcode",
            Architecture::GraniteMoe if shared => "granitemoeshared",
            a => a.gguf_name(),
        },
        "hidden_size": mc.hidden_size, "intermediate_size": mc.intermediate_size,
        "num_hidden_layers": mc.num_layers, "num_attention_heads": mc.num_heads,
        "num_key_value_heads": mc.num_kv_heads, "head_dim": mc.head_dim, "vocab_size": mc.vocab_size,
        "max_position_embeddings": mc.max_position_embeddings, "rms_norm_eps": mc.rms_norm_eps,
        "rope_theta": mc.rope_theta, "tie_word_embeddings": mc.tie_word_embeddings,
        "sliding_window": mc.sliding_window,
        "rope_scaling": mc.rope_scaling.as_ref().map(|s| rope_scaling_json(&mc, s)),
        "attention_bias": mc.attention_bias,
        "hidden_act": if mc.activation == Activation::Relu2 { "relu2" } else { "silu" }, "eos_token_id": mc.eos_token_ids[0],
        "torch_dtype": "float32",
    });
    let mut config = config;
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
            extra["layer_types"] = json!(layer_types(&mc));
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
    if mc.architecture == Architecture::Olmo2 && windowed {
        config["layer_types"] = json!(layer_types(&mc));
    }
    if matches!(
        mc.architecture,
        Architecture::Exaone4 | Architecture::Cohere2
    ) {
        // Both as EXAONE's folders carry them (its config cannot make layer types without a
        // window).
        config["layer_types"] = json!(layer_types(&mc));
        config["sliding_window_pattern"] = json!(mc.sliding_window_pattern);
    }
    if mc.architecture == Architecture::SmolLM3 {
        // One flag a layer, 1 where it applies RoPE, as SmolLM3's folders carry it.
        let flags: Vec<u8> = (0..mc.num_layers)
            .map(|i| u8::from(!mc.no_rope_layers.contains(&i)))
            .collect();
        config["no_rope_layers"] = json!(flags);
        config["no_rope_layer_interval"] = json!(4);
    }
    if matches!(
        mc.architecture,
        Architecture::Ernie45 | Architecture::Ernie45Moe
    ) {
        config["use_bias"] = json!(false);
    }
    if matches!(
        mc.architecture,
        Architecture::HunyuanDense | Architecture::HunyuanMoe
    ) {
        // Its fixed NTK alpha, as Hunyuan's folders give it: the stored base stretched by
        // alpha^(d / (d - 2)) is the model's.
        let d = mc.head_dim as f64;
        config["rope_theta"] = json!(mc.rope_theta as f64 / HUNYUAN_ALPHA.powf(d / (d - 2.0)));
        config["rope_scaling"] = json!({"type": "dynamic", "alpha": HUNYUAN_ALPHA, "factor": 1.0});
    }
    if let (Architecture::Mixtral, Some(m)) = (mc.architecture, mc.moe) {
        config["num_local_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
    } else if let (Architecture::Olmoe, Some(m)) = (mc.architecture, mc.moe) {
        config["num_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["norm_topk_prob"] = json!(m.normalize);
    } else if let (Architecture::Glm4Moe | Architecture::Dots1, Some(m)) = (mc.architecture, mc.moe)
    {
        let shared = m
            .shared
            .map_or(0, |s| s.intermediate_size / m.intermediate_size);
        config["n_routed_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["moe_intermediate_size"] = json!(m.intermediate_size);
        config["norm_topk_prob"] = json!(m.normalize);
        config["routed_scaling_factor"] = json!(m.scale);
        config["n_shared_experts"] = json!(shared);
        config["first_k_dense_replace"] = json!(m.first_layer);
        config["n_group"] = json!(1);
        config["topk_group"] = json!(1);
        if mc.architecture == Architecture::Glm4Moe {
            config["use_qk_norm"] = json!(false);
            config["attention_bias"] = json!(true);
        } else {
            config["max_window_layers"] = json!(mc.num_layers);
        }
        // The released folders carry a multi-token-prediction layer; this one has none.
        config["num_nextn_predict_layers"] = json!(0);
    } else if let (Architecture::HunyuanMoe, Some(m)) = (mc.architecture, mc.moe) {
        // As Hunyuan-A13B's folder gives them: a value a layer.
        let layers = |x: usize| json!(vec![x; mc.num_layers]);
        config["num_experts"] = json!(m.experts);
        config["moe_topk"] = layers(m.experts_per_token);
        config["moe_intermediate_size"] = layers(m.intermediate_size);
        config["num_shared_expert"] = layers(1);
        config["use_cla"] = json!(false);
    } else if let (Architecture::GraniteMoe, Some(m)) = (mc.architecture, mc.moe) {
        config["num_local_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["shared_intermediate_size"] = json!(m.shared.map_or(0, |s| s.intermediate_size));
    } else if let (Architecture::Ernie45Moe, Some(m)) = (mc.architecture, mc.moe) {
        let shared = m
            .shared
            .map_or(0, |s| s.intermediate_size / m.intermediate_size);
        config["moe_num_experts"] = json!(m.experts);
        config["moe_k"] = json!(m.experts_per_token);
        config["moe_intermediate_size"] = json!(m.intermediate_size);
        config["moe_num_shared_experts"] = json!(shared);
        config["moe_layer_start_index"] = json!(m.first_layer);
        config["moe_layer_end_index"] = json!(-1);
        config["moe_layer_interval"] = json!(1);
    } else if let (Architecture::GptOss, Some(m)) = (mc.architecture, mc.moe) {
        config["num_local_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["layer_types"] = json!(layer_types(&mc));
        config["swiglu_limit"] = json!(7.0);
    } else if let Some(m) = mc.moe {
        if let Some(s) = m.shared {
            config["shared_expert_intermediate_size"] = json!(s.intermediate_size);
        }
        config["num_experts"] = json!(m.experts);
        config["num_experts_per_tok"] = json!(m.experts_per_token);
        config["moe_intermediate_size"] = json!(m.intermediate_size);
        config["norm_topk_prob"] = json!(m.normalize);
        config["decoder_sparse_step"] = json!(1);
        config["mlp_only_layers"] = json!([]);
    }
    if mc.architecture == Architecture::SeedOss {
        config["attention_out_bias"] = json!(false);
        config["mlp_bias"] = json!(false);
    }
    if mc.architecture.layer_norm() {
        // The LayerNorms' epsilon by its name, and Cohere's logit scale rather than a divisor.
        let eps = config
            .as_object_mut()
            .and_then(|c| c.remove("rms_norm_eps"));
        let key = match mc.architecture {
            Architecture::Nemotron => "norm_eps",
            Architecture::Starcoder2 => "norm_epsilon",
            _ => "layer_norm_eps",
        };
        config[key] = eps.unwrap_or_default();
        if mc.architecture == Architecture::StableLm {
            config["use_qkv_bias"] = json!(mc.attention_bias);
            config["qk_layernorm"] = json!(mc.qk_layer_norm);
            config["use_parallel_residual"] = json!(mc.parallel_residual);
        } else if mc.architecture == Architecture::Starcoder2 {
            config["use_bias"] = json!(mc.attention_bias);
            config["hidden_act"] = json!("gelu_pytorch_tanh");
        } else if mc.architecture == Architecture::Phi2 {
            config["qk_layernorm"] = json!(false);
            config["hidden_act"] = json!("gelu_new");
        } else if mc.architecture != Architecture::Nemotron {
            config["use_qk_norm"] = json!(mc.qk_layer_norm);
        }
        if let Some(g) = mc.granite {
            config["logit_scale"] = json!(1.0 / f64::from(g.logits));
        }
    } else if let (Architecture::MiniCpm, Some(g)) = (mc.architecture, mc.granite) {
        // MiniCPM's keys, from which kiln works the multipliers out ([`TinyConfig::minicpm`]).
        config["scale_emb"] = json!(g.embedding);
        config["scale_depth"] = json!(f64::from(g.residual) * (mc.num_layers as f64).sqrt());
        config["dim_model_base"] = json!(mc.hidden_size as f64 / f64::from(g.logits));
    } else if let Some(g) = mc.granite {
        config["embedding_multiplier"] = json!(g.embedding);
        config["attention_multiplier"] = json!(g.attention);
        config["residual_multiplier"] = json!(g.residual);
        config["logits_scaling"] = json!(g.logits);
    }
    if let Some(r) = mc.partial_rotary_dim {
        config["partial_rotary_factor"] = json!(r as f64 / mc.head_dim as f64);
    }
    if crate::models::NativeFolder::of(&mc).is_some() {
        super::native_folder::config_keys(&mc, &mut config);
    }
    if let Some(RopeScaling::LongRope(r)) = &mc.rope_scaling {
        // Phi-3's folders keep the pre-training context outside the scaling object.
        config["original_max_position_embeddings"] = json!(r.original_max_position_embeddings);
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

/// Each layer's kind as config.json's `layer_types` names it.
fn layer_types(mc: &ModelConfig) -> Vec<&'static str> {
    (0..mc.num_layers)
        .map(|i| match mc.layer_window(i) {
            Some(_) => "sliding_attention",
            None => "full_attention",
        })
        .collect()
}

/// `rope_scaling` as config.json spells it, the factors on cos and sin left out where they are
/// the defaults transformers computes.
fn rope_scaling_json(mc: &ModelConfig, s: &RopeScaling) -> serde_json::Value {
    match s {
        RopeScaling::Linear(f) => json!({"rope_type": "linear", "factor": f}),
        RopeScaling::Llama3(s) => json!({
            "rope_type": "llama3", "factor": s.factor, "low_freq_factor": s.low_freq_factor,
            "high_freq_factor": s.high_freq_factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
        }),
        RopeScaling::LongRope(r) => {
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
            scaling
        }
        RopeScaling::Yarn(y) => {
            let mut scaling = json!({
                "rope_type": "yarn", "factor": y.factor,
                "original_max_position_embeddings": y.original_max_position_embeddings,
                "beta_fast": y.beta_fast, "beta_slow": y.beta_slow,
            });
            if y.attention_factor != Yarn::mscale(y.factor as f64, 1.0) as f32 {
                scaling["attention_factor"] = json!(y.attention_factor);
            }
            if !y.truncate {
                scaling["truncate"] = json!(false);
            }
            scaling
        }
    }
}
