//! A small GGUF v3 writer for tests: arbitrary metadata and raw tensors (`GgufBuilder`), and
//! whole llama/qwen2 models from a config + HF-named f32 tensors (`model_gguf`), quantizing and
//! applying llama.cpp's Q/K row permutation like the real converter.

use std::path::Path;

use super::NamedTensor;
use super::quant::quantize;
use crate::gguf::dequant::DType;
use crate::gguf::names::{hf_to_gguf_name, permute_rows};
use crate::gguf::reader::{DEFAULT_ALIGNMENT, MetaValue};
use crate::{Architecture, ModelConfig, ModelError, RopeScaling, Yarn};

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

struct RawTensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: u32,
    data: Vec<u8>,
}

/// Collects metadata and tensors, then serializes a GGUF v3 file.
#[derive(Default)]
pub struct GgufBuilder {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<RawTensor>,
}

impl GgufBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn meta(&mut self, key: &str, value: MetaValue) -> &mut Self {
        self.metadata.retain(|(k, _)| k != key);
        self.metadata.push((key.to_string(), value));
        self
    }

    /// A tensor given as raw bytes; `dims` innermost first (GGUF order).
    pub fn raw_tensor(
        &mut self,
        gguf_name: &str,
        dims: &[u64],
        ggml_type: u32,
        data: Vec<u8>,
    ) -> &mut Self {
        self.tensors.push(RawTensor {
            name: gguf_name.to_string(),
            dims: dims.to_vec(),
            ggml_type,
            data,
        });
        self
    }

    /// A tensor given in HF shape (`[rows, cols]`, row-major) encoded as `dtype`.
    pub fn tensor(
        &mut self,
        gguf_name: &str,
        hf_shape: &[usize],
        data: &[f32],
        dtype: DType,
    ) -> &mut Self {
        let dims: Vec<u64> = hf_shape.iter().rev().map(|&d| d as u64).collect();
        self.raw_tensor(gguf_name, &dims, dtype.ggml_id(), quantize(dtype, data))
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.header(&[]);
        let start = out.len();
        for t in &self.tensors {
            out.extend(&t.data);
            out.resize(start + align(out.len() - start), 0);
        }
        out
    }

    /// Metadata and tensor infos (the builder's tensors, then `extra`), padded to where the
    /// tensor data starts.
    fn header(&self, extra: &[TensorSpec]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(b"GGUF");
        out.extend(3u32.to_le_bytes());
        out.extend(((self.tensors.len() + extra.len()) as u64).to_le_bytes());
        out.extend((self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend(v.type_id().to_le_bytes());
            put_value(&mut out, v);
        }
        let own = self
            .tensors
            .iter()
            .map(|t| (&t.name, &t.dims, t.ggml_type, t.data.len()));
        let more = extra
            .iter()
            .map(|t| (&t.name, &t.dims, t.ggml_type, t.bytes));
        let mut offset = 0usize;
        for (name, dims, ggml_type, bytes) in own.chain(more) {
            put_str(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(ggml_type.to_le_bytes());
            out.extend((offset as u64).to_le_bytes());
            offset = align(offset + bytes);
        }
        out.resize(align(out.len()), 0);
        out
    }

    /// Writes the file with `extra` tensors after the builder's own, their bytes made by
    /// `fill(index into extra, piece)` in pieces of at most `piece` bytes each: files larger
    /// than memory, at disk speed.
    pub fn write_streamed(
        &self,
        path: &Path,
        extra: &[TensorSpec],
        piece: usize,
        mut fill: impl FnMut(usize, &mut [u8]),
    ) -> Result<(), ModelError> {
        use std::io::Write;
        let err = |e| ModelError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let file = std::fs::File::create(path).map_err(err)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 22, file);
        out.write_all(&self.header(extra)).map_err(err)?;
        let mut written = 0usize;
        let pad = |out: &mut std::io::BufWriter<_>, written: &mut usize| {
            let to = align(*written);
            out.write_all(&vec![0u8; to - *written])?;
            *written = to;
            Ok(())
        };
        for t in &self.tensors {
            out.write_all(&t.data).map_err(err)?;
            written += t.data.len();
            pad(&mut out, &mut written).map_err(err)?;
        }
        let mut buf = vec![0u8; piece];
        for (i, t) in extra.iter().enumerate() {
            let mut left = t.bytes;
            while left > 0 {
                let n = left.min(piece);
                fill(i, &mut buf[..n]);
                out.write_all(&buf[..n]).map_err(err)?;
                left -= n;
            }
            written += t.bytes;
            pad(&mut out, &mut written).map_err(err)?;
        }
        out.flush().map_err(err)
    }

    pub fn write(&self, path: &Path) -> Result<(), ModelError> {
        std::fs::write(path, self.to_bytes()).map_err(|e| ModelError::Io {
            path: path.to_path_buf(),
            source: e,
        })
    }
}

fn align(x: usize) -> usize {
    x.div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT
}

/// A tensor of [`GgufBuilder::write_streamed`], its bytes made while the file is written.
pub struct TensorSpec {
    pub name: String,
    /// Innermost first (GGUF order).
    pub dims: Vec<u64>,
    pub ggml_type: u32,
    pub bytes: usize,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend(x.to_le_bytes()),
        MetaValue::I16(x) => out.extend(x.to_le_bytes()),
        MetaValue::U32(x) => out.extend(x.to_le_bytes()),
        MetaValue::I32(x) => out.extend(x.to_le_bytes()),
        MetaValue::F32(x) => out.extend(x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(items) => {
            out.extend(items.first().map_or(4, MetaValue::type_id).to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            items.iter().for_each(|i| put_value(out, i));
        }
        MetaValue::U64(x) => out.extend(x.to_le_bytes()),
        MetaValue::I64(x) => out.extend(x.to_le_bytes()),
        MetaValue::F64(x) => out.extend(x.to_le_bytes()),
    }
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
        .meta(&format!("{a}.rope.dimension_count"), u(cfg.rotary_dim()))
        .meta(
            &format!("{a}.rope.freq_base"),
            MetaValue::F32(cfg.rope_theta),
        )
        .meta(
            &format!("{a}.attention.layer_norm_rms_epsilon"),
            MetaValue::F32(cfg.rms_norm_eps),
        );
    if let Some(w) = cfg.sliding_window {
        b.meta(&format!("{a}.attention.sliding_window"), u(w));
    }
    // As llama.cpp's converter, which writes no pattern for Gemma 2 (always every second
    // layer).
    if let Some(n) = cfg
        .sliding_window_pattern
        .filter(|_| cfg.architecture != Architecture::Gemma2)
    {
        b.meta(&format!("{a}.attention.sliding_window_pattern"), u(n));
    }
    if let Some(g) = cfg.granite {
        for (key, m) in [
            ("embedding_scale", g.embedding),
            ("attention.scale", g.attention),
            ("residual_scale", g.residual),
            ("logit_scale", g.logits),
        ] {
            b.meta(&format!("{a}.{key}"), MetaValue::F32(m));
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
    for t in tensors {
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
        b.tensor(&gname, &t.shape, &data, stored_type(&t.shape, dtype));
    }
    b
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
