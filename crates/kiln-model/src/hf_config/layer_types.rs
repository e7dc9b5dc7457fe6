//! Which kind each of a config.json's layers is: whether it slides (the window, and the first
//! layer it applies to), which layers are global among sliding ones (Gemma's, OLMo 3's, EXAONE
//! 4's and Command R7B's interleaving), and which turn without RoPE.

use serde_json::Value;

use crate::ModelError;
use crate::config::Architecture;

/// The window the config gives; Command R7B's where its config leaves it out (its
/// configuration class's).
pub(super) fn window(v: &Value, architecture: Architecture) -> Option<usize> {
    match (architecture, v.get("sliding_window")) {
        (Architecture::Cohere2, None) => Some(4096),
        _ => v
            .get("sliding_window")
            .and_then(Value::as_u64)
            .map(|x| x as usize),
    }
}

/// The sliding window and the first layer it applies to, of `window` (the config's, from
/// [`window`]) on a model of `layers` layers.
///
/// A window on every layer (Mistral), on all but every `n`th (Gemma 3), or on the layers from
/// `max_window_layers` on (Qwen, which ignores `sliding_window` unless `use_sliding_window`). A
/// window as long as the context or longer is kept, as transformers keeps it: it bounds
/// nothing, but it still makes a layer a sliding one, which on Gemma 3 and OLMo 3 turns at its
/// own RoPE base.
pub(super) fn sliding_window(
    v: &Value,
    architecture: Architecture,
    model_type: &str,
    window: Option<usize>,
    layers: usize,
    file: &str,
) -> Result<(Option<usize>, usize), ModelError> {
    Ok(match (uses_sliding(v, architecture, model_type), window) {
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
                let first = qwen_first_sliding_layer(v, layers, file)?;
                if first < layers {
                    (Some(w), first)
                } else {
                    (None, 0)
                }
            } else {
                (Some(w), 0)
            }
        }
        _ => (None, 0),
    })
}

/// Whether the family's layers slide where its config gives a window.
fn uses_sliding(v: &Value, architecture: Architecture, model_type: &str) -> bool {
    match architecture {
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
        | Architecture::InternLm2
        | Architecture::Exaone
        | Architecture::Olmo
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

/// EXAONE 4 (with a window) and Command R7B: every `n`th layer global, and without RoPE.
pub(super) fn exaone_global(
    v: &Value,
    architecture: Architecture,
    window: Option<usize>,
    file: &str,
) -> Result<Option<usize>, ModelError> {
    match (architecture, window) {
        (Architecture::Exaone4 | Architecture::Cohere2, Some(_)) => {
            Ok(Some(exaone_pattern(v, file)?))
        }
        // Command R7B's global layers apply no RoPE and its sliding ones do: without a
        // window none would turn.
        (Architecture::Cohere2, None) => Err(ModelError::Unsupported {
            file: file.into(),
            reason: "cohere2 without a sliding window (no layer would apply RoPE)".into(),
        }),
        _ => Ok(None),
    }
}

/// Every how many layers one is global: Gemma 2's and Gemma 3's interleaving, OLMo 3's where
/// it has a window, or `exaone_global` (from [`exaone_global`]).
pub(super) fn global_pattern(
    v: &Value,
    architecture: Architecture,
    sliding_window: Option<usize>,
    exaone_global: Option<usize>,
    file: &str,
) -> Result<Option<usize>, ModelError> {
    Ok(match architecture {
        Architecture::Gemma2 => Some(gemma_pattern(v, 2, file)?),
        Architecture::Gemma3 => Some(gemma_pattern(v, 6, file)?),
        Architecture::Olmo2 if sliding_window.is_some() => Some(gemma_pattern(v, 4, file)?),
        _ => exaone_global,
    })
}

/// The layers without RoPE: SmolLM3's, or each global layer of `exaone_global`'s pattern.
pub(super) fn no_rope_layers(
    v: &Value,
    architecture: Architecture,
    exaone_global: Option<usize>,
    layers: usize,
    file: &str,
) -> Result<Vec<usize>, ModelError> {
    Ok(match architecture {
        Architecture::SmolLM3 => smollm3_no_rope_layers(v, layers, file)?,
        _ => match exaone_global {
            Some(n) => (0..layers).filter(|i| (i + 1) % n == 0).collect(),
            None => Vec::new(),
        },
    })
}

/// SmolLM3's layers without RoPE: where `no_rope_layers` (one flag a layer, 1 for RoPE) has
/// 0, or every `no_rope_layer_interval`th layer (4 unless given) when it has no list.
fn smollm3_no_rope_layers(v: &Value, layers: usize, file: &str) -> Result<Vec<usize>, ModelError> {
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
