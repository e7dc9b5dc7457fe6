//! `ModelConfig`: the architecture hyper-parameters, parsed from a Hugging Face `config.json`
//! (GGUF metadata is mapped onto the same struct in `gguf::config`), plus RoPE frequencies.

use serde_json::Value;

use crate::{GenerationDefaults, ModelError};

/// The decoder families kiln runs. Mistral loads as `Llama` (with its sliding window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    /// Llama with q/k/v biases.
    Qwen2,
    /// Llama with an RMSNorm over each head of q and of k before the rotary embedding
    /// (`q_norm`, `k_norm`, one gain of `head_dim` each), no biases.
    Qwen3,
}

impl Architecture {
    /// The name in GGUF's `general.architecture` (and Hugging Face's `model_type`).
    pub fn gguf_name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
        }
    }
}

/// Llama 3 style RoPE frequency scaling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeScaling {
    pub factor: f32,
    pub low_freq_factor: f32,
    pub high_freq_factor: f32,
    pub original_max_position_embeddings: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    pub rope_scaling: Option<RopeScaling>,
    pub tie_word_embeddings: bool,
    /// Qwen2: q/k/v projections have biases.
    pub attention_bias: bool,
    /// Mistral: each token attends to at most this many of the latest positions, itself
    /// included (`None`: to all of them).
    pub sliding_window: Option<usize>,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
    /// The sampling settings the model ships with (the front ends' request defaults).
    pub generation: GenerationDefaults,
}

impl ModelConfig {
    /// Whether q and k are RMS-normalized per head before the rotary embedding (Qwen3).
    pub fn qk_norm(&self) -> bool {
        self.architecture == Architecture::Qwen3
    }

    /// What sets this model apart from a plain Llama, in words (for `kiln info`).
    pub fn features(&self) -> Vec<String> {
        let mut f = Vec::new();
        if self.num_kv_heads < self.num_heads {
            f.push(format!(
                "grouped-query attention ({} query heads per KV head)",
                self.num_heads / self.num_kv_heads.max(1)
            ));
        }
        if self.attention_bias {
            f.push("q/k/v biases".into());
        }
        if self.qk_norm() {
            f.push("per-head q/k RMSNorm".into());
        }
        if self.tie_word_embeddings {
            f.push("tied embeddings".into());
        }
        if let Some(w) = self.sliding_window {
            f.push(format!("sliding window of {w} positions on every layer"));
        }
        if let Some(s) = self.rope_scaling {
            f.push(format!(
                "Llama 3 RoPE scaling (factor {}, original context {})",
                s.factor, s.original_max_position_embeddings
            ));
        }
        f.push(format!(
            "RMSNorm eps {}, RoPE base {}",
            self.rms_norm_eps, self.rope_theta
        ));
        f
    }

    /// The `head_dim / 2` RoPE inverse frequencies, with Llama 3 scaling applied when configured.
    pub fn rope_inv_freq(&self) -> Vec<f32> {
        self.rope_inv_freq_f64()
            .into_iter()
            .map(|f| f as f32)
            .collect()
    }

    /// The same frequencies in f64, for rotary tables computed on the CPU.
    pub fn rope_inv_freq_f64(&self) -> Vec<f64> {
        let half = self.head_dim / 2;
        let theta = self.rope_theta as f64;
        (0..half)
            .map(|i| {
                let inv = 1.0 / theta.powf((2 * i) as f64 / self.head_dim as f64);
                match &self.rope_scaling {
                    None => inv,
                    Some(s) => llama3_scale(inv, s),
                }
            })
            .collect()
    }

    /// Total number of parameters (embeddings counted once when tied).
    pub fn param_count(&self) -> usize {
        let h = self.hidden_size;
        let q = self.num_heads * self.head_dim;
        let kv = self.num_kv_heads * self.head_dim;
        let mut layer = 2 * h + h * q + 2 * h * kv + q * h + 3 * h * self.intermediate_size;
        if self.attention_bias {
            layer += q + 2 * kv;
        }
        let mut total = self.vocab_size * h + self.num_layers * layer + h;
        if !self.tie_word_embeddings {
            total += self.vocab_size * h;
        }
        total
    }

    /// Basic sanity checks shared by both file formats.
    pub(crate) fn validate(&self, file: &str) -> Result<(), ModelError> {
        let bad = |r: String| Err(ModelError::config(file, r));
        if self.num_layers == 0
            || self.hidden_size == 0
            || self.num_heads == 0
            || self.vocab_size == 0
        {
            return bad(format!(
                "zero-sized model (layers {}, hidden {}, heads {}, vocab {})",
                self.num_layers, self.hidden_size, self.num_heads, self.vocab_size
            ));
        }
        if self.num_kv_heads == 0 || self.num_heads % self.num_kv_heads != 0 {
            return bad(format!(
                "num_heads {} is not a multiple of num_kv_heads {}",
                self.num_heads, self.num_kv_heads
            ));
        }
        if self.head_dim == 0 || self.head_dim % 2 != 0 {
            return bad(format!(
                "head_dim {} must be even and non-zero",
                self.head_dim
            ));
        }
        Ok(())
    }

    /// Parses a Hugging Face `config.json`. `file` is only used in error messages.
    pub fn from_hf_json(json: &str, file: &str) -> Result<ModelConfig, ModelError> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| ModelError::corrupt(file, format!("invalid JSON: {e}")))?;
        let model_type = v
            .get("model_type")
            .and_then(Value::as_str)
            .unwrap_or("<missing model_type>");
        let architecture = match model_type {
            "llama" | "mistral" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            "qwen3" => Architecture::Qwen3,
            other => {
                return Err(ModelError::UnsupportedArchitecture {
                    file: file.into(),
                    architecture: other.into(),
                });
            }
        };
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
        let max_position_embeddings = opt_usize("max_position_embeddings").unwrap_or(2048);
        let sliding = opt_usize("sliding_window");
        let uses_sliding = match architecture {
            Architecture::Qwen2 | Architecture::Qwen3 => v
                .get("use_sliding_window")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            Architecture::Llama => true,
        };
        // A window on every layer (Mistral) is run; Qwen's, on the layers from
        // `max_window_layers` on only, is not.
        let sliding_window = match (uses_sliding, sliding) {
            (true, Some(w)) if w < max_position_embeddings => {
                if architecture != Architecture::Llama {
                    return Err(ModelError::Unsupported {
                        file: file.into(),
                        reason: format!(
                            "sliding-window attention on some layers (use_sliding_window, sliding_window {w})"
                        ),
                    });
                }
                Some(w)
            }
            _ => None,
        };
        let cfg = ModelConfig {
            architecture,
            hidden_size,
            intermediate_size: req("intermediate_size")?,
            num_layers: req("num_hidden_layers")?,
            num_heads,
            num_kv_heads: opt_usize("num_key_value_heads").unwrap_or(num_heads),
            head_dim: opt_usize("head_dim").unwrap_or(hidden_size / num_heads.max(1)),
            vocab_size: req("vocab_size")?,
            max_position_embeddings,
            rms_norm_eps: opt_f("rms_norm_eps").unwrap_or(1e-6) as f32,
            rope_theta: opt_f("rope_theta").unwrap_or(10000.0) as f32,
            rope_scaling: parse_rope_scaling(v.get("rope_scaling"), file)?,
            tie_word_embeddings: v
                .get("tie_word_embeddings")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            attention_bias: match architecture {
                Architecture::Qwen2 => true,
                Architecture::Llama | Architecture::Qwen3 => v
                    .get("attention_bias")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            sliding_window,
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

    /// Adds ids not yet present to `eos_token_ids` (keeps order, no duplicates).
    pub(crate) fn merge_eos(&mut self, ids: impl IntoIterator<Item = u32>) {
        for id in ids {
            if !self.eos_token_ids.contains(&id) {
                self.eos_token_ids.push(id);
            }
        }
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

fn parse_rope_scaling(v: Option<&Value>, file: &str) -> Result<Option<RopeScaling>, ModelError> {
    let Some(obj) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let kind = obj
        .get("rope_type")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("<missing rope_type>");
    if kind == "default" {
        return Ok(None);
    }
    if kind != "llama3" {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("rope_scaling type \"{kind}\""),
        });
    }
    let f = |k: &str| {
        obj.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| ModelError::config(file, format!("rope_scaling is missing \"{k}\"")))
    };
    Ok(Some(RopeScaling {
        factor: f("factor")? as f32,
        low_freq_factor: f("low_freq_factor")? as f32,
        high_freq_factor: f("high_freq_factor")? as f32,
        original_max_position_embeddings: f("original_max_position_embeddings")? as usize,
    }))
}

/// Llama 3 frequency scaling of one inverse frequency.
pub(crate) fn llama3_scale(inv: f64, s: &RopeScaling) -> f64 {
    let orig = s.original_max_position_embeddings as f64;
    let (low, high, factor) = (
        s.low_freq_factor as f64,
        s.high_freq_factor as f64,
        s.factor as f64,
    );
    let wavelen = 2.0 * std::f64::consts::PI / inv;
    if wavelen < orig / high {
        inv
    } else if wavelen > orig / low {
        inv / factor
    } else {
        let smooth = (orig / wavelen - low) / (high - low);
        (1.0 - smooth) * inv / factor + smooth * inv
    }
}
