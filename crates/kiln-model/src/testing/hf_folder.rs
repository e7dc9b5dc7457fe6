//! Tiny random models as Hugging Face folders: config.json as each architecture writes it
//! ([`super::hf_config_json`]), the weights in safetensors (one file or shards with their
//! index), the tiny tokenizer and the generation config.

use std::path::Path;

use serde_json::json;

use super::{NamedTensor, TinyConfig, quantize, tiny_tensors, tiny_tokenizer};
use crate::{Architecture, DType, ModelConfig, ModelError};

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
        _ if crate::models::NativeFolder::of(mc).is_some() => {
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

/// The Hugging Face folder around the weights: config, tiny tokenizer, generation config.
pub(super) fn write_folder_files(dir: &Path, cfg: &TinyConfig) -> Result<ModelConfig, ModelError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mc = cfg.model_config();
    let config = super::hf_config_json::config_json(&mc);
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
