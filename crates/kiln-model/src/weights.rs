//! `Weights`: a name → tensor index over one or more mapped files. Tensors are decoded to f32
//! only when asked for (`read_f32`), so the store never holds a second full copy of the weights.

use std::collections::HashMap;

use crate::ModelError;
use crate::gguf::dequant::{self, DType};
use crate::gguf::names::unpermute_rows;
use crate::storage::Storage;

/// How a tensor's elements are stored, or the name of an unsupported type.
#[derive(Debug, Clone)]
pub(crate) enum StoredType {
    Supported(DType),
    Unsupported(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub storage: usize,
    /// Absolute byte range in the storage.
    pub offset: usize,
    pub len: usize,
    pub dtype: StoredType,
    /// HF shape: linear weights are `[out_features, in_features]`.
    pub shape: Vec<usize>,
    /// `Some(n_heads)`: rows were interleaved by llama.cpp's converter and must be un-permuted.
    pub permute_heads: Option<usize>,
    /// File shown in error messages.
    pub file: String,
}

/// Lazily-read tensors, addressed by Hugging Face names.
pub struct Weights {
    storages: Vec<Storage>,
    entries: HashMap<String, Entry>,
    /// Shown in "missing tensor" errors.
    source: String,
}

impl Weights {
    pub(crate) fn new(source: impl Into<String>) -> Self {
        Weights {
            storages: Vec::new(),
            entries: HashMap::new(),
            source: source.into(),
        }
    }

    pub(crate) fn add_storage(&mut self, s: Storage) -> usize {
        self.storages.push(s);
        self.storages.len() - 1
    }

    pub(crate) fn storage_bytes(&self, idx: usize) -> &[u8] {
        self.storages[idx].bytes()
    }

    pub(crate) fn insert(&mut self, name: String, entry: Entry) {
        self.entries.insert(name, entry);
    }

    fn entry(&self, name: &str) -> Result<&Entry, ModelError> {
        self.entries
            .get(name)
            .ok_or_else(|| ModelError::MissingTensor {
                file: self.source.clone(),
                tensor: name.to_string(),
            })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// All tensor names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// HF-convention shape (linear weights are `[out_features, in_features]`, row-major).
    pub fn shape(&self, name: &str) -> Result<Vec<usize>, ModelError> {
        Ok(self.entry(name)?.shape.clone())
    }

    /// The tensor's storage type in the file.
    pub fn dtype(&self, name: &str) -> Result<DType, ModelError> {
        let e = self.entry(name)?;
        match &e.dtype {
            StoredType::Supported(d) => Ok(*d),
            StoredType::Unsupported(t) => Err(ModelError::UnsupportedTensorType {
                file: e.file.clone(),
                tensor: name.to_string(),
                dtype: t.clone(),
            }),
        }
    }

    /// The tensor converted (dequantized) to f32, row-major in its HF shape.
    pub fn read_f32(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        let dtype = self.dtype(name)?;
        let e = self.entry(name)?;
        let bytes = self.storages[e.storage]
            .bytes()
            .get(e.offset..e.offset + e.len)
            .ok_or_else(|| {
                ModelError::corrupt(
                    &e.file,
                    format!("data of tensor \"{name}\" lies past the end of the file"),
                )
            })?;
        let mut data = dequant::to_f32(dtype, bytes);
        let numel: usize = e.shape.iter().product();
        if data.len() != numel {
            return Err(ModelError::corrupt(
                &e.file,
                format!(
                    "tensor \"{name}\" decoded to {} elements, expected {numel}",
                    data.len()
                ),
            ));
        }
        if let Some(n_heads) = e.permute_heads {
            let rows = e.shape[0];
            if n_heads == 0 || rows % n_heads != 0 || (rows / n_heads) % 2 != 0 {
                return Err(ModelError::corrupt(
                    &e.file,
                    format!(
                        "tensor \"{name}\" has {rows} rows, not divisible into {n_heads} heads of even size"
                    ),
                ));
            }
            data = unpermute_rows(&data, rows, n_heads);
        }
        Ok(data)
    }
}
