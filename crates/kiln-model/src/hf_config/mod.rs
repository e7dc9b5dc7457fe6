//! A Hugging Face `config.json` → [`ModelConfig`].

use serde_json::Value;

mod family;
mod moe;
mod multipliers;
mod rope;

use crate::config::{Activation, Architecture, ModelConfig};
use crate::{GenerationDefaults, ModelError};

impl ModelConfig {
    /// Parses a Hugging Face `config.json`. `file` is only used in error messages.
    pub fn from_hf_json(json: &str, file: &str) -> Result<ModelConfig, ModelError> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| ModelError::corrupt(file, format!("invalid JSON: {e}")))?;
        let model_type = (v.get("model_type").and_then(Value::as_str))
            .unwrap_or("<missing model_type>")
            .to_string();
        let model_type = model_type.as_str();
        let architecture = family::architecture(model_type, file)?;
        let v = family::common_keys(v, architecture);
        let req = |k: &str| -> Result<usize, ModelError> {
            v.get(k)
                .and_then(Value::as_u64)
                .map(|x| x as usize)
                .ok_or_else(|| ModelError::config(file, format!("missing or non-integer \"{k}\"")))
        };
        let opt_usize = |k: &str| v.get(k).and_then(Value::as_u64).map(|x| x as usize);
        let opt_f = |k: &str| v.get(k).and_then(Value::as_f64);

        let hidden_size = req("hidden_size")?;
        let num_heads = req("num_attention_heads")?;
        // Command-R's config.json gives 8192 positions and, as `model_max_length`, the 128k it
        // was trained to (what llama.cpp's converter writes as its context).
        // (A learned position embedding has a row for each of `max_position_embeddings`.)
        let max_position_embeddings = (opt_usize("model_max_length")
            .filter(|_| architecture.layer_norm() && !architecture.learned_positions()))
        .or(opt_usize("max_position_embeddings"))
        .unwrap_or(2048);
        // Command R7B's window where its config leaves it out (its configuration class's).
        let sliding = match (architecture, v.get("sliding_window")) {
            (Architecture::Cohere2, None) => Some(4096),
            _ => opt_usize("sliding_window"),
        };
        let gemma = architecture.is_gemma();
        let uses_sliding = match architecture {
            Architecture::Qwen2
            | Architecture::Qwen3
            | Architecture::Qwen3Moe
            | Architecture::Qwen2Moe
            | Architecture::SmolLM3 => v
                .get("use_sliding_window")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            Architecture::Olmo2 => model_type == "olmo3",
            // dots.llm1's layers from max_window_layers on slide whenever it has a window.
            Architecture::Dots1 => true,
            Architecture::Glm4
            | Architecture::Ernie45
            | Architecture::SeedOss
            | Architecture::HunyuanDense
            | Architecture::HunyuanMoe
            | Architecture::Glm4Moe
            | Architecture::Ernie45Moe
            | Architecture::Olmoe
            | Architecture::MiniCpm
            | Architecture::Cohere
            | Architecture::StableLm
            | Architecture::Nemotron
            | Architecture::Phi2
            | Architecture::GptNeox
            | Architecture::Falcon
            | Architecture::Gpt2
            | Architecture::Starcoder
            | Architecture::Bloom
            | Architecture::Mpt
            | Architecture::GptJ
            | Architecture::GptOss => false,
            Architecture::Llama
            | Architecture::Mixtral
            | Architecture::Arcee
            | Architecture::Exaone4
            | Architecture::Gemma2
            | Architecture::Gemma3
            | Architecture::Phi3
            | Architecture::Granite
            | Architecture::GraniteMoe
            | Architecture::Cohere2
            | Architecture::Starcoder2 => true,
        };
        // A window on every layer (Mistral), on all but every `n`th (Gemma 3), or on the layers
        // from `max_window_layers` on (Qwen, which ignores `sliding_window` unless
        // `use_sliding_window`). A window as long as the context or longer is kept, as
        // transformers keeps it: it bounds nothing, but it still makes a layer a sliding one,
        // which on Gemma 3 and OLMo 3 turns at its own RoPE base.
        let num_layers = req("num_hidden_layers")?;
        let (sliding_window, first_sliding_layer) = match (uses_sliding, sliding) {
            (true, Some(w)) => {
                if matches!(
                    architecture,
                    Architecture::Qwen2
                        | Architecture::Qwen3
                        | Architecture::Qwen3Moe
                        | Architecture::Qwen2Moe
                        | Architecture::SmolLM3
                        | Architecture::Dots1
                ) {
                    let first = qwen_first_sliding_layer(&v, num_layers, file)?;
                    if first < num_layers {
                        (Some(w), first)
                    } else {
                        (None, 0)
                    }
                } else {
                    (Some(w), 0)
                }
            }
            _ => (None, 0),
        };
        // A partial rotary embedding: Phi-3's and GLM-4's code turns the first `factor *
        // head_dim` dimensions of a head (Phi-4-mini; GLM-4's half unless the config says);
        // the other families' turn all of them. Transformers 5 also writes the factor into
        // `rope_parameters`.
        let head_dim = opt_usize("head_dim").unwrap_or(hidden_size / num_heads.max(1));
        let partial = opt_f("partial_rotary_factor")
            .or_else(|| {
                v.pointer("/rope_parameters/partial_rotary_factor")
                    .and_then(Value::as_f64)
            })
            .or(matches!(architecture, Architecture::Glm4 | Architecture::Glm4Moe).then_some(0.5))
            .or((architecture == Architecture::StableLm).then_some(0.25))
            .or((architecture == Architecture::Nemotron).then_some(0.5))
            .or((architecture == Architecture::Phi2).then_some(0.5))
            .or((architecture == Architecture::GptNeox).then_some(0.25));
        let partial_rotary_dim = match partial.filter(|&f| f != 1.0) {
            None => None,
            Some(f)
                if matches!(
                    architecture,
                    Architecture::Phi3
                        | Architecture::Glm4
                        | Architecture::Glm4Moe
                        | Architecture::StableLm
                        | Architecture::Nemotron
                        | Architecture::Phi2
                        | Architecture::GptNeox
                        | Architecture::GptJ
                ) =>
            {
                let dim = (f * head_dim as f64).round() as usize;
                if (dim as f64 - f * head_dim as f64).abs() > 1e-6 {
                    return Err(ModelError::config(
                        file,
                        format!(
                            "partial_rotary_factor {f} of head_dim {head_dim} is not a whole number of dimensions"
                        ),
                    ));
                }
                Some(dim)
            }
            Some(f) => {
                return Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: format!(
                        "partial rotary embedding (partial_rotary_factor {f}) on {model_type}"
                    ),
                });
            }
        };
        // OLMoE's clipping of q, k and v, which kiln does not run.
        if v.get("clip_qkv").is_some_and(|c| !c.is_null()) {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!("clip_qkv (q, k and v clipped) on {model_type}"),
            });
        }
        // Phi's LayerNorms of q and k (`qk_layernorm`; Phi-1.5 and Phi-2 have none).
        if architecture == Architecture::Phi2
            && v.get("qk_layernorm").and_then(Value::as_bool) == Some(true)
        {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: "Phi with LayerNorms of q and k (qk_layernorm)".into(),
            });
        }
        // Command-R+'s and StableLM 2 12B's LayerNorms of each head of q and k (Command R7B's
        // configuration has none), and StableLM 2 12B's attention and MLP side by side.
        let flag = |key: &str| v.get(key).and_then(Value::as_bool) == Some(true);
        let qk_layer_norm = match architecture {
            Architecture::Cohere => flag("use_qk_norm"),
            Architecture::StableLm => flag("qk_layernorm"),
            _ => false,
        };
        // (GPT-NeoX's side by side unless its config says not, each sub-layer on a LayerNorm
        // of its own; Falcon's always, on two LayerNorms where it has the newer layer unless
        // its config says one.)
        let parallel_residual = match architecture {
            Architecture::StableLm => flag("use_parallel_residual"),
            Architecture::GptNeox => v.get("use_parallel_residual") != Some(&Value::Bool(false)),
            Architecture::Falcon => true,
            _ => false,
        };
        let mlp_norm = match architecture {
            Architecture::GptNeox => parallel_residual,
            Architecture::Falcon => {
                flag("new_decoder_architecture") && opt_usize("num_ln_in_parallel_attn") != Some(1)
            }
            _ => false,
        };
        if architecture == Architecture::Falcon {
            for (key, on, what) in [
                ("alibi", true, "ALiBi positions (alibi)"),
                (
                    "apply_residual_connection_post_layernorm",
                    true,
                    "the residual taken after the LayerNorm",
                ),
                (
                    "parallel_attn",
                    false,
                    "its sub-layers one after the other (parallel_attn false)",
                ),
            ] {
                if v.get(key).and_then(Value::as_bool) == Some(on) {
                    return Err(ModelError::Unsupported {
                        file: file.into(),
                        reason: format!("Falcon with {what}"),
                    });
                }
            }
        }
        // GPT-2's options that change its forward pass: scores not scaled by 1/sqrt(head_dim),
        // or scaled by the layer's number too; cross-attention to an encoder. (StarCoder's
        // configs share the first.)
        if architecture.learned_positions() {
            for (key, on, what) in [
                ("scale_attn_weights", false, "attention scores not scaled"),
                (
                    "scale_attn_by_inverse_layer_idx",
                    true,
                    "attention scores scaled by the layer's number",
                ),
                ("add_cross_attention", true, "cross-attention to an encoder"),
            ] {
                if v.get(key).and_then(Value::as_bool) == Some(on) {
                    return Err(ModelError::Unsupported {
                        file: file.into(),
                        reason: format!("{model_type} with {what} ({key} {on})"),
                    });
                }
            }
        }
        if architecture == Architecture::Bloom && flag("apply_residual_connection_post_layernorm") {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: "BLOOM with the residual taken after the LayerNorm \
                         (apply_residual_connection_post_layernorm)"
                    .into(),
            });
        }
        let mpt_alibi = match architecture {
            Architecture::Mpt => Some(family::mpt_attention(&v, file)?),
            _ => None,
        };
        if architecture.layer_norm() && !qk_layer_norm && flag("use_qk_norm") {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!("LayerNorms of q and k (use_qk_norm) on {model_type}"),
            });
        }
        // Biases on o_proj or the MLP (Llama's and Seed-OSS's flags): no kiln kernel adds them.
        for key in ["mlp_bias", "attention_out_bias"] {
            if v.get(key).and_then(Value::as_bool) == Some(true) {
                return Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: format!("{key} (biases kiln does not run) on {model_type}"),
                });
            }
        }
        let hunyuan = matches!(
            architecture,
            Architecture::HunyuanDense | Architecture::HunyuanMoe
        );
        // Hunyuan's cross-layer attention (layers sharing K/V), which kiln does not run.
        if hunyuan && v.get("use_cla").and_then(Value::as_bool) == Some(true) {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: "Hunyuan with cross-layer attention (use_cla)".into(),
            });
        }
        let alpha_head_dim = hunyuan.then_some(head_dim);
        let rope = rope::rope(&v, max_position_embeddings, file, alpha_head_dim)?;
        // Gemma 2's soft caps; any other architecture's would be a forward pass kiln does
        // not know.
        let cap = |key: &str| -> Result<Option<f32>, ModelError> {
            match v.get(key).filter(|c| !c.is_null()) {
                None => Ok(None),
                Some(c) if architecture == Architecture::Gemma2 => match c.as_f64() {
                    Some(c) => Ok(Some(c as f32)),
                    None => Err(ModelError::config(
                        file,
                        format!("\"{key}\" is not a number"),
                    )),
                },
                Some(_) => Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: format!("logit soft-capping ({key}) on {model_type}"),
                }),
            }
        };
        // EXAONE 4 (with a window) and Command R7B: every `n`th layer global, and without RoPE.
        let exaone_global = match (architecture, sliding) {
            (Architecture::Exaone4 | Architecture::Cohere2, Some(_)) => {
                Some(exaone_pattern(&v, file)?)
            }
            // Command R7B's global layers apply no RoPE and its sliding ones do: without a
            // window none would turn.
            (Architecture::Cohere2, None) => {
                return Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: "cohere2 without a sliding window (no layer would apply RoPE)".into(),
                });
            }
            _ => None,
        };
        let (attn_softcap, final_softcap) = (
            cap("attn_logit_softcapping")?,
            cap("final_logit_softcapping")?,
        );
        let cfg = ModelConfig {
            architecture,
            hidden_size,
            intermediate_size: req("intermediate_size")?,
            num_layers,
            num_heads,
            num_kv_heads: opt_usize("num_key_value_heads").unwrap_or(num_heads),
            head_dim,
            vocab_size: req("vocab_size")?,
            max_position_embeddings,
            // The LayerNorms' by their own names (Nemotron's, Cohere's and StableLM's).
            rms_norm_eps: opt_f(match architecture {
                Architecture::Nemotron => "norm_eps",
                Architecture::Starcoder2 => "norm_epsilon",
                _ if architecture.layer_norm() => "layer_norm_eps",
                _ => "rms_norm_eps",
            })
            .unwrap_or(default_rms_norm_eps(architecture)) as f32,
            rope_theta: rope.theta,
            rope_scaling: rope.scaling,
            tie_word_embeddings: v
                .get("tie_word_embeddings")
                .and_then(Value::as_bool)
                .unwrap_or(
                    gemma
                        || matches!(
                            architecture,
                            Architecture::SmolLM3
                                | Architecture::Ernie45
                                | Architecture::Ernie45Moe
                                | Architecture::Cohere
                                | Architecture::Cohere2
                                | Architecture::Starcoder2
                                | Architecture::Falcon
                                | Architecture::Gpt2
                                | Architecture::Starcoder
                                | Architecture::Bloom
                                | Architecture::Mpt
                        ),
                ),
            attention_bias: family::attention_bias(&v, architecture, file)?,
            sliding_window,
            first_sliding_layer,
            sliding_window_pattern: match architecture {
                Architecture::Gemma2 => Some(gemma_pattern(&v, 2, file)?),
                Architecture::Gemma3 => Some(gemma_pattern(&v, 6, file)?),
                Architecture::Olmo2 if sliding_window.is_some() => {
                    Some(gemma_pattern(&v, 4, file)?)
                }
                _ => exaone_global,
            },
            // Gemma 3's sliding layers turn at 10000 unless the config says; OLMo 3's at the
            // global layers' base, without their scaling.
            rope_local_theta: match architecture {
                Architecture::Gemma3 => Some(rope.local_theta.unwrap_or(10000.0)),
                Architecture::Olmo2 if sliding_window.is_some() => {
                    Some(rope.local_theta.unwrap_or(rope.theta))
                }
                _ => None,
            },
            query_pre_attn_scalar: opt_f("query_pre_attn_scalar")
                .filter(|_| gemma)
                .map(|s| s as f32),
            partial_rotary_dim,
            fused_qkv: architecture.fused_qkv(),
            qk_layer_norm,
            parallel_residual,
            mlp_norm,
            // BLOOM's, at the bias maximum of its code (8); MPT's, at its config's.
            alibi: (architecture == Architecture::Bloom)
                .then_some(8.0)
                .or(mpt_alibi),
            granite: multipliers::multipliers(&v, architecture, head_dim, num_layers, file)?,
            no_rope_layers: match architecture {
                Architecture::SmolLM3 => no_rope_layers(&v, num_layers, file)?,
                _ => match exaone_global {
                    Some(n) => (0..num_layers).filter(|i| (i + 1) % n == 0).collect(),
                    None => Vec::new(),
                },
            },
            attn_softcap,
            final_softcap,
            // Gemma's RMSNorm gains and Nemotron's LayerNorm gains are stored minus one.
            norm_gain_offset: if gemma || architecture == Architecture::Nemotron {
                1.0
            } else {
                0.0
            },
            activation: activation(&v, file)?,
            moe: moe::moe(&v, architecture, num_layers, file)?,
            bos_token_id: v
                .get("bos_token_id")
                .and_then(Value::as_u64)
                .map(|x| x as u32),
            eos_token_ids: token_id_list(v.get("eos_token_id")),
            generation: GenerationDefaults::default(),
        };
        cfg.validate(file)?;
        Ok(cfg)
    }
}

/// `rms_norm_eps` where a config leaves it out: transformers' default for the architecture.
fn default_rms_norm_eps(architecture: Architecture) -> f64 {
    match architecture {
        Architecture::Phi3
        | Architecture::Olmo2
        | Architecture::Exaone4
        | Architecture::Ernie45
        | Architecture::Arcee
        | Architecture::Olmoe
        | Architecture::Glm4Moe
        | Architecture::Ernie45Moe
        | Architecture::HunyuanMoe
        | Architecture::HunyuanDense
        | Architecture::Cohere
        | Architecture::Cohere2
        | Architecture::StableLm
        | Architecture::Nemotron
        | Architecture::Starcoder2
        | Architecture::Phi2
        | Architecture::GptNeox
        | Architecture::Falcon
        | Architecture::Gpt2
        | Architecture::Starcoder
        | Architecture::Bloom
        | Architecture::Mpt
        | Architecture::GptJ => 1e-5,
        Architecture::Glm4 => 1.5625e-7,
        _ => 1e-6,
    }
}

/// `eos_token_id` may be an integer or a list of integers.
pub(crate) fn token_id_list(v: Option<&Value>) -> Vec<u32> {
    match v {
        Some(Value::Number(n)) => n.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_u64)
            .map(|x| x as u32)
            .collect(),
        _ => Vec::new(),
    }
}

/// The gate activation (`hidden_act`, or Gemma's `hidden_activation`).
fn activation(v: &Value, file: &str) -> Result<Activation, ModelError> {
    let name = v
        .get("hidden_activation")
        .or_else(|| v.get("hidden_act"))
        .and_then(Value::as_str)
        .unwrap_or("silu");
    match name {
        "silu" | "swish" => Ok(Activation::Silu),
        // `gelu_new` (Phi's) is GELU with the tanh approximation too.
        "gelu_pytorch_tanh" | "gelu_tanh" | "gelu_new" => Ok(Activation::GeluTanh),
        "relu2" => Ok(Activation::Relu2),
        "gelu" => Ok(Activation::Gelu),
        other => Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("MLP activation \"{other}\""),
        }),
    }
}

/// Qwen's first sliding layer, `max_window_layers` (28 unless given); a `layer_types` list,
/// which newer files carry, must say the same.
fn qwen_first_sliding_layer(v: &Value, layers: usize, file: &str) -> Result<usize, ModelError> {
    let first = (v.get("max_window_layers").and_then(Value::as_u64)).map_or(28, |n| n as usize);
    if let Some(types) = v.get("layer_types").and_then(Value::as_array) {
        let sliding = |i: usize| types.get(i).and_then(Value::as_str) == Some("sliding_attention");
        if types.len() != layers || (0..layers).any(|i| sliding(i) != (i >= first)) {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!(
                    "layer_types that are not global layers then sliding ones from \
                     max_window_layers ({first}) on"
                ),
            });
        }
    }
    Ok(first)
}

/// SmolLM3's layers without RoPE: where `no_rope_layers` (one flag a layer, 1 for RoPE) has
/// 0, or every `no_rope_layer_interval`th layer (4 unless given) when it has no list.
fn no_rope_layers(v: &Value, layers: usize, file: &str) -> Result<Vec<usize>, ModelError> {
    let Some(flags) = v.get("no_rope_layers").filter(|f| !f.is_null()) else {
        let n = (v.get("no_rope_layer_interval").and_then(Value::as_u64)).map_or(4, |n| n as usize);
        return Ok((1..=layers)
            .filter(|i| i % n.max(1) == 0)
            .map(|i| i - 1)
            .collect());
    };
    let flags: Vec<u64> = (flags.as_array().into_iter().flatten())
        .map(Value::as_u64)
        .collect::<Option<_>>()
        .filter(|f: &Vec<u64>| f.len() == layers && f.iter().all(|&x| x <= 1))
        .ok_or_else(|| {
            ModelError::config(
                file,
                format!("no_rope_layers must be {layers} flags of 0 or 1"),
            )
        })?;
    Ok((0..layers).filter(|&i| flags[i] == 0).collect())
}

/// EXAONE 4's global layers: every `n`th, from `sliding_window_pattern` (a number, or a
/// string of `L`s ending in one `G`, such as "LLLG"), `layer_types`, or 4.
fn exaone_pattern(v: &Value, file: &str) -> Result<usize, ModelError> {
    match v.get("sliding_window_pattern") {
        Some(Value::String(p)) => {
            match p.strip_suffix('G').filter(|l| l.chars().all(|c| c == 'L')) {
                Some(l) => Ok(l.len() + 1),
                None => Err(ModelError::Unsupported {
                    file: file.into(),
                    reason: format!(
                        "sliding_window_pattern \"{p}\" (kiln runs local layers followed by one global)"
                    ),
                }),
            }
        }
        _ => gemma_pattern(v, 4, file),
    }
}

/// Gemma's interleaving: `sliding_window_pattern` (every `n`th layer global), or a
/// `layer_types` list of that shape.
fn gemma_pattern(v: &Value, default: usize, file: &str) -> Result<usize, ModelError> {
    if let Some(n) = v.get("sliding_window_pattern").and_then(Value::as_u64) {
        return Ok(n as usize);
    }
    let Some(types) = v.get("layer_types").and_then(Value::as_array) else {
        return Ok(default);
    };
    let global: Vec<bool> = types
        .iter()
        .map(|t| t.as_str() == Some("full_attention"))
        .collect();
    let n = global
        .iter()
        .position(|&g| g)
        .map_or(global.len() + 1, |i| i + 1);
    if global
        .iter()
        .enumerate()
        .all(|(i, &g)| g == ((i + 1) % n == 0))
    {
        Ok(n)
    } else {
        Err(ModelError::Unsupported {
            file: file.into(),
            reason: "layer_types that are not every n-th layer global".into(),
        })
    }
}
