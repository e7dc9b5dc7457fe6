//! A small GGUF v3 writer for tests: arbitrary metadata and raw tensors, held whole or made
//! while the file is written.

use std::path::Path;

use super::quant::quantize;
use crate::ModelError;
use crate::gguf::dequant::DType;
use crate::gguf::reader::{DEFAULT_ALIGNMENT, MetaValue};

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

    /// The file as another `general.architecture` names it: that name, and its keys under
    /// it (`qwen2.block_count` as `qwen2vl.block_count`).
    pub fn rename_architecture(&mut self, to: &str) -> &mut Self {
        let from = self
            .metadata
            .iter()
            .find_map(|(k, v)| match (k.as_str(), v) {
                ("general.architecture", MetaValue::String(a)) => Some(format!("{a}.")),
                _ => None,
            });
        for (key, value) in &mut self.metadata {
            if key == "general.architecture" {
                *value = MetaValue::String(to.into());
            } else if let Some(rest) = from.as_deref().and_then(|f| key.strip_prefix(f)) {
                *key = format!("{to}.{rest}");
            }
        }
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
