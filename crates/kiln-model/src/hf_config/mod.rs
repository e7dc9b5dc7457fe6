//! A Hugging Face `config.json` → [`ModelConfig`].

use serde_json::Value;

mod family;
mod layer_types;
mod moe;
pub(crate) mod multimodal;
mod multipliers;
mod norm_eps;
mod partial_rotary;
mod refusals;
mod rope;

use crate::config::{Activation, Architecture, ModelConfig};
use crate::{GenerationDefaults, ModelError};

impl ModelConfig {
    /// Parses a Hugging Face `config.json`. `file` is only used in error messages.
    pub fn from_hf_json(json: &str, file: &str) -> Result<ModelConfig, ModelError> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| ModelError::corrupt(file, format!("invalid JSON: {e}")))?;
        let text_model_of = (v.get("model_type").and_then(Value::as_str))
            .filter(|t| multimodal::is_wrapper(t))
            .map(str::to_string);
        let v = multimodal::language_model(v, file)?;
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
        let window = layer_types::window(&v, architecture);
        let gemma = architecture.is_gemma();
        let num_layers = req("num_hidden_layers")?;
        let (sliding_window, first_sliding_layer) =
            layer_types::sliding_window(&v, architecture, model_type, window, num_layers, file)?;
        let head_dim = opt_usize("head_dim").unwrap_or(hidden_size / num_heads.max(1));
        let partial_rotary_dim =
            partial_rotary::partial_rotary_dim(&v, architecture, model_type, head_dim, file)?;
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
        refusals::refuse_unrun(&v, architecture, model_type, qk_layer_norm, file)?;
        let hunyuan = matches!(
            architecture,
            Architecture::HunyuanDense | Architecture::HunyuanMoe
        );
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
        let exaone_global = layer_types::exaone_global(&v, architecture, window, file)?;
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
            rms_norm_eps: norm_eps::norm_eps(&v, architecture),
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
            sliding_window_pattern: layer_types::global_pattern(
                &v,
                architecture,
                sliding_window,
                exaone_global,
                file,
            )?,
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
            // (InternLM2's folders keep q, k and v in one tensor; its GGUF files, apart.)
            fused_qkv: architecture.fused_qkv() || architecture == Architecture::InternLm2,
            qk_layer_norm,
            parallel_residual,
            mlp_norm,
            // BLOOM's, at the bias maximum of its code (8); MPT's, at its config's.
            alibi: match architecture {
                Architecture::Bloom => Some(8.0),
                Architecture::Mpt => Some(family::mpt_alibi_bias_max(&v)),
                _ => None,
            },
            granite: multipliers::multipliers(&v, architecture, head_dim, num_layers, file)?,
            no_rope_layers: layer_types::no_rope_layers(
                &v,
                architecture,
                exaone_global,
                num_layers,
                file,
            )?,
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
            text_model_of,
        };
        cfg.validate(file)?;
        Ok(cfg)
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
