//! GGUF loading: container parsing (`reader`), metadata read by key (`meta`) → config
//! (`config`; the architecture in `architecture`, a mixture of experts' in `moe`, the RoPE
//! scaling in `rope`), tensor types (`dequant`), naming and Q/K un-permutation (`names`);
//! `load` assembles a model from them.

mod architecture;
pub(crate) mod config;
pub mod dequant;
pub mod kquant;
mod meta;
mod moe;
pub mod names;
pub mod nonlinear;
pub mod reader;
mod rope;

use self::config::TensorFacts;
use self::dequant::DType;
use self::meta::Meta;
use self::names::Interleaved;
use self::reader::MetaValue;
use crate::storage::Storage;
use crate::tokenizer::{Tokenizer, gguf_bpe, gguf_spm};
use crate::weights::{Entry, StoredRows, StoredType, Weights};
use crate::{ChatTemplate, ModelConfig, ModelError, RopeScaling};

pub(crate) struct Loaded {
    pub config: ModelConfig,
    pub weights: Weights,
    pub tokenizer: Tokenizer,
    pub chat_template: Option<ChatTemplate>,
}

/// Loads a GGUF model held in `storage`; `file` names it in errors.
pub(crate) fn load(storage: Storage, file: &str) -> Result<Loaded, ModelError> {
    let header = reader::parse_header(storage.bytes(), file)?;
    let meta = Meta {
        map: &header.metadata,
        file,
    };
    architecture::architecture(&meta)?;
    let has = |n: &str| header.tensors.iter().any(|t| t.name == n);
    let facts = TensorFacts {
        has_output: has("output.weight"),
        has_q_bias: has("blk.0.attn_q.bias") || has("blk.0.attn_qkv.bias"),
        fused_qkv: has("blk.0.attn_qkv.weight"),
        has_q_norm: has("blk.0.attn_q_norm.weight"),
        has_ffn_norm: has("blk.0.ffn_norm.weight"),
        has_attn_norm_2: has("blk.0.attn_norm_2.weight"),
        embed_rows: header
            .tensors
            .iter()
            .find(|t| t.name == "token_embd.weight")
            .and_then(|t| t.dims.get(1))
            .map(|&d| d as usize),
    };
    let mut cfg = config::config_from_meta(&meta, &facts)?;

    let (arch, heads) = (cfg.architecture, (cfg.num_heads, cfg.num_kv_heads));
    let weights = index_tensors(&header, storage, file, |name| {
        let interleaved = match (arch.gguf_permutes_qk(), names::permuted_kind(name)) {
            (true, Some(true)) => Some(Interleaved::whole(heads.0)),
            (true, Some(false)) => Some(Interleaved::whole(heads.1)),
            _ => None,
        };
        (names::gguf_to_hf_name(name, arch), interleaved)
    })?;

    if cfg.rope_scaling.is_none() && weights.contains("rope_freqs.weight") {
        let divisors = weights.read_f32("rope_freqs.weight")?;
        let orig = meta.usize(&format!(
            "{}.rope.scaling.original_context_length",
            cfg.architecture.gguf_name()
        ));
        cfg.rope_scaling = Some(RopeScaling::Llama3(rope::rope_scaling_from_freqs(
            &cfg, &divisors, orig, file,
        )?));
    }

    if weights.contains("rope_factors_long.weight") {
        let factors = (
            weights.read_f32("rope_factors_short.weight")?,
            weights.read_f32("rope_factors_long.weight")?,
        );
        let long_rope = rope::long_rope(&meta, &cfg, factors)?;
        cfg.rope_scaling = Some(RopeScaling::LongRope(long_rope));
        cfg.validate(file)?;
    }

    let tokenizer = tokenizer(&meta, cfg.bos_token_id)?;
    // Gemma's turns end with `<end_of_turn>`, which its files do not name as EOS, and its
    // files made by llama.cpp's converter carry no chat template.
    let mut template = meta.str("tokenizer.chat_template");
    if cfg.architecture.is_gemma() {
        cfg.merge_eos(tokenizer.token_to_id("<end_of_turn>"));
        template = template.or(Some(crate::GEMMA_CHAT_TEMPLATE));
    }
    let chat_template = match template {
        Some(src) => {
            let name = |id: Option<u32>| {
                id.and_then(|i| tokenizer.id_to_token(i))
                    .unwrap_or_default()
            };
            Some(ChatTemplate::new(
                src,
                &name(cfg.bos_token_id),
                &name(cfg.eos_token_ids.first().copied()),
                file,
            )?)
        }
        None => None,
    };
    Ok(Loaded {
        config: cfg,
        weights,
        tokenizer,
        chat_template,
    })
}

/// Indexes every tensor of the GGUF file `header` was parsed from (held in `storage`), each
/// under the name `place` gives it with the rotary layout (if any) its rows are put back from;
/// checks each tensor's bytes lie in the file and overlap no other's.
pub(crate) fn index_tensors(
    header: &reader::GgufHeader,
    storage: Storage,
    file: &str,
    place: impl Fn(&str) -> (String, Option<Interleaved>),
) -> Result<Weights, ModelError> {
    let file_len = storage.bytes().len();
    let mut weights = Weights::new(file);
    let idx = weights.add_storage(storage);
    let mut spans = Vec::with_capacity(header.tensors.len());
    for t in &header.tensors {
        let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
        let numel = t
            .dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize));
        let numel = numel.ok_or_else(|| {
            ModelError::corrupt(
                file,
                format!("tensor \"{}\" has absurd dims {:?}", t.name, t.dims),
            )
        })?;
        let dtype = match DType::from_ggml_id(t.ggml_type) {
            Ok(d) => StoredType::Supported(d),
            Err(name) => StoredType::Unsupported(name),
        };
        let offset = header.data_start.checked_add(t.offset as usize);
        let len = match dtype {
            StoredType::Supported(d) => {
                let bs = d.block_size();
                if t.dims.first().is_none_or(|&d0| d0 as usize % bs != 0) {
                    return Err(ModelError::corrupt(
                        file,
                        format!(
                            "tensor \"{}\" of type {} has rows of {:?} elements, not a whole number of {bs}-element blocks",
                            t.name,
                            d.name(),
                            t.dims.first()
                        ),
                    ));
                }
                d.byte_len(numel)
            }
            StoredType::Unsupported(_) => 0,
        };
        match offset.and_then(|o| o.checked_add(len)) {
            Some(end) if end <= file_len => {}
            _ => {
                return Err(ModelError::corrupt(
                    file,
                    format!(
                        "file is truncated: tensor \"{}\" needs bytes up to {} but the file has {file_len}",
                        t.name,
                        header.data_start as u64 + t.offset + len as u64
                    ),
                ));
            }
        }
        spans.push((t.offset, len as u64, t));
        let (name, interleaved) = place(&t.name);
        // Qwen2 MoE's shared expert's gate and ERNIE 4.5's experts' choice biases are one
        // row each, which llama.cpp stores as a vector.
        let row = [
            "shared_expert_gate.weight",
            "moe_statics.e_score_correction_bias",
        ];
        let shape = match shape.as_slice() {
            [n] if row.iter().any(|r| name.ends_with(r)) => vec![1, *n],
            _ => shape,
        };
        let entry = Entry {
            storage: idx,
            offset: offset.unwrap_or(0),
            len,
            dtype,
            shape,
            stored_rows: interleaved.map(StoredRows::Interleaved),
            transposed: false,
            file: file.to_string(),
        };
        // A stack of experts' matrices (`ffn_gate_exps`: experts x rows x columns) is read
        // as each expert's matrix, under Hugging Face's per-expert names; a stack of their
        // biases (gpt-oss's: experts x rows) as each expert's bias.
        let stacked = match entry.shape.len() {
            3 => true,
            2 => name.ends_with(".bias"),
            _ => false,
        };
        match name.split_once(".experts.") {
            Some((layer, part)) if stacked => {
                let (experts, per) = (entry.shape[0], entry.len / entry.shape[0].max(1));
                for e in 0..experts {
                    let one = Entry {
                        offset: entry.offset + e * per,
                        len: per,
                        shape: entry.shape[1..].to_vec(),
                        ..entry.clone()
                    };
                    weights.insert(format!("{layer}.experts.{e}.{part}"), one);
                }
            }
            _ => weights.insert(name, entry),
        }
    }

    check_no_overlap(&mut spans, file)?;
    Ok(weights)
}

/// Each tensor's bytes (as its type and shape require) must end before the next tensor starts:
/// a tensor whose data is shorter than its type and shape need is caught here by name.
fn check_no_overlap(
    spans: &mut [(u64, u64, &reader::TensorInfo)],
    file: &str,
) -> Result<(), ModelError> {
    spans.sort_by_key(|s| s.0);
    for w in spans.windows(2) {
        let ((off, len, t), (next, _, n)) = (w[0], w[1]);
        if off + len > next {
            return Err(ModelError::corrupt(
                file,
                format!(
                    "tensor \"{}\" ({} of shape {:?}) needs {len} bytes from offset {off}, but tensor \"{}\" starts at {next}",
                    t.name,
                    DType::from_ggml_id(t.ggml_type)
                        .map(DType::name)
                        .unwrap_or_else(|n| n),
                    t.dims,
                    n.name
                ),
            ));
        }
    }
    Ok(())
}

fn strings(meta: &Meta, key: &str) -> Result<Vec<String>, ModelError> {
    let arr = meta.get(key).and_then(MetaValue::as_array).ok_or_else(|| {
        ModelError::tokenizer(meta.file, format!("missing string array \"{key}\""))
    })?;
    arr.iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            ModelError::tokenizer(meta.file, format!("\"{key}\" is not an array of strings"))
        })
}

/// Builds the tokenizer described by the `tokenizer.ggml.*` metadata.
fn tokenizer(meta: &Meta, bos: Option<u32>) -> Result<Tokenizer, ModelError> {
    let file = meta.file;
    let model = meta
        .str("tokenizer.ggml.model")
        .unwrap_or("<missing tokenizer.ggml.model>");
    let tokens = strings(meta, "tokenizer.ggml.tokens")?;
    let types: Vec<u32> = meta
        .get("tokenizer.ggml.token_type")
        .and_then(MetaValue::as_array)
        .map(|a| a.iter().map(|v| v.as_u64().unwrap_or(1) as u32).collect())
        .unwrap_or_default();
    // SentencePiece vocabularies start with BOS unless the file says; byte-level ones as
    // their split rule's family does (Llama 3's, Tekken's).
    let (json, add_bos_default) = match model {
        "gpt2" => {
            let merges = strings(meta, "tokenizer.ggml.merges")?;
            let pre = meta.str("tokenizer.ggml.pre").unwrap_or("default");
            gguf_bpe::tokenizer_json(&tokens, &types, &merges, pre, file)?
        }
        "llama" => {
            let scores: Vec<f32> = meta
                .get("tokenizer.ggml.scores")
                .and_then(MetaValue::as_array)
                .map(|a| a.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect())
                .ok_or_else(|| ModelError::tokenizer(file, "missing \"tokenizer.ggml.scores\""))?;
            let prefix = meta
                .get("tokenizer.ggml.add_space_prefix")
                .and_then(MetaValue::as_bool)
                .unwrap_or(true);
            (
                gguf_spm::tokenizer_json(&tokens, &types, &scores, prefix),
                true,
            )
        }
        other => {
            return Err(ModelError::Unsupported {
                file: file.into(),
                reason: format!("tokenizer model \"{other}\" (supported: gpt2, llama)"),
            });
        }
    };
    let bytes = serde_json::to_vec(&json).map_err(|e| ModelError::tokenizer(file, e))?;
    let inner =
        tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| ModelError::tokenizer(file, e))?;
    let add_bos = meta
        .get("tokenizer.ggml.add_bos_token")
        .and_then(MetaValue::as_bool)
        .unwrap_or(add_bos_default);
    Ok(Tokenizer::from_parts(
        inner,
        if add_bos { bos } else { None },
        file,
    ))
}
