//! `Weights`: a name → tensor index over one or more mapped files. Tensors are decoded to f32
//! only when asked for (`read_f32`), so the store never holds a second full copy of the weights.

use std::collections::HashMap;

use crate::ModelError;
use crate::gguf::dequant::{self, DType};
use crate::gguf::names::{Interleaved, reorder_rows};
use crate::storage::Storage;

/// How a tensor's elements are stored, or the name of an unsupported type.
#[derive(Debug, Clone)]
pub(crate) enum StoredType {
    Supported(DType),
    Unsupported(String),
}

/// How a tensor's rows are stored where that is not the order kiln runs them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredRows {
    /// q or k rows with their rotary pairs side by side.
    Interleaved(Interleaved),
    /// q, k and v rows stored by KV head: each of `kv_heads` groups holds its `q_per_kv`
    /// query heads, then its key head, then its value head (GPT-NeoX's `query_key_value` in
    /// Hugging Face folders, one query head a group; Falcon's, grouped or one a group); kiln
    /// runs all of q, then k, then v.
    QkvByGroup { kv_heads: usize, q_per_kv: usize },
}

impl StoredRows {
    /// The rows a tensor of `shape` holds in this order.
    fn rows(self, shape: &[usize]) -> usize {
        match self {
            StoredRows::Interleaved(il) => il.rows(shape),
            StoredRows::QkvByGroup { .. } => shape.first().copied().unwrap_or(1),
        }
    }

    /// Why a tensor of `rows` rows cannot be stored so, if it cannot.
    fn check(self, rows: usize) -> Result<(), String> {
        match self {
            StoredRows::Interleaved(il) => il.check(rows),
            StoredRows::QkvByGroup { kv_heads, q_per_kv } => {
                let heads = kv_heads * (q_per_kv + 2);
                match heads != 0 && rows % heads == 0 {
                    true => Ok(()),
                    false => Err(format!(
                        "{rows} rows, not q, k and v of {kv_heads} groups of {q_per_kv} query heads"
                    )),
                }
            }
        }
    }

    /// `data`'s `rows` rows moved from the stored order to the order kiln runs, or back with
    /// `to_stored`.
    pub(crate) fn reorder<T: Copy + Default>(
        self,
        data: &[T],
        rows: usize,
        to_stored: bool,
    ) -> Vec<T> {
        match self {
            StoredRows::Interleaved(il) => il.reorder(data, rows, to_stored),
            StoredRows::QkvByGroup { kv_heads, q_per_kv } => {
                let group = q_per_kv + 2;
                let d = rows / (kv_heads * group);
                let q = kv_heads * q_per_kv * d;
                reorder_rows(data, rows, to_stored, |r| {
                    let (g, slot, j) = (r / (group * d), r / d % group, r % d);
                    match slot {
                        s if s < q_per_kv => (g * q_per_kv + s) * d + j,
                        s if s == q_per_kv => q + g * d + j,
                        _ => q + kv_heads * d + g * d + j,
                    }
                })
            }
        }
    }
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
    /// Rows stored in another order than kiln runs them, put back on read.
    pub stored_rows: Option<StoredRows>,
    /// A matrix stored as its transpose, `[in, out]` (GPT-2's `Conv1D` products), turned back
    /// on read; `shape` is kiln's, `[out, in]`.
    pub transposed: bool,
    /// File shown in error messages.
    pub file: String,
}

impl Entry {
    /// Part `i` of `n` equal parts along the first dimension: a matrix of a stack of three
    /// dimensions (the first dropped), or a range of a matrix's rows. Only for element types
    /// whose bytes divide by rows (safetensors').
    pub fn part(&self, i: usize, n: usize) -> Entry {
        let len = self.len / n;
        let shape = match self.shape.as_slice() {
            [_, rest @ ..] if self.shape.len() == 3 => rest.to_vec(),
            [rows, rest @ ..] => [&[rows / n], rest].concat(),
            [] => Vec::new(),
        };
        Entry {
            offset: self.offset + i * len,
            len,
            shape,
            ..self.clone()
        }
    }
}

/// The files' own name of a tensor, given kiln's, where they name it otherwise.
type StoredName = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Lazily-read tensors, addressed by Hugging Face names.
pub struct Weights {
    storages: Vec<Storage>,
    entries: HashMap<String, Entry>,
    /// Shown in "missing tensor" errors.
    source: String,
    /// The files' own name of a tensor kiln names otherwise (GPT-NeoX's folders'), for
    /// messages.
    stored_name: Option<StoredName>,
}

impl Weights {
    pub(crate) fn new(source: impl Into<String>) -> Self {
        Weights {
            storages: Vec::new(),
            entries: HashMap::new(),
            source: source.into(),
            stored_name: None,
        }
    }

    pub(crate) fn add_storage(&mut self, s: Storage) -> usize {
        self.storages.push(s);
        self.storages.len() - 1
    }

    pub(crate) fn storage_bytes(&self, idx: usize) -> &[u8] {
        self.storages[idx].bytes()
    }

    /// The file tensor `name` was indexed from, if it was.
    pub(crate) fn file_of(&self, name: &str) -> Option<&str> {
        self.entries.get(name).map(|e| e.file.as_str())
    }

    pub(crate) fn insert(&mut self, name: String, entry: Entry) {
        self.entries.insert(name, entry);
    }

    fn entry(&self, name: &str) -> Result<&Entry, ModelError> {
        self.entries
            .get(name)
            .ok_or_else(|| ModelError::MissingTensor {
                file: self.source.clone(),
                tensor: self.label(name),
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
                tensor: self.label(name),
                dtype: t.clone(),
            }),
        }
    }

    /// Bytes of tensor data in the file(s), and the number of tensors of each storage type
    /// (GGML names; unsupported types included), sorted by name.
    pub fn stored_bytes(&self) -> (u64, Vec<(String, usize)>) {
        let mut counts = std::collections::BTreeMap::new();
        let mut bytes = 0u64;
        for e in self.entries.values() {
            bytes += e.len as u64;
            let name = match &e.dtype {
                StoredType::Supported(d) => d.name(),
                StoredType::Unsupported(n) => n.clone(),
            };
            *counts.entry(name).or_insert(0) += 1;
        }
        (bytes, counts.into_iter().collect())
    }

    /// The tensor's bytes in the file, checked to split into rows as its entry says.
    fn stored(&self, name: &str) -> Result<(DType, &[u8], &Entry), ModelError> {
        let dtype = self.dtype(name)?;
        let e = self.entry(name)?;
        let bytes = self.storages[e.storage]
            .bytes()
            .get(e.offset..e.offset + e.len)
            .ok_or_else(|| {
                ModelError::corrupt(
                    &e.file,
                    format!(
                        "data of tensor \"{}\" lies past the end of the file",
                        self.label(name)
                    ),
                )
            })?;
        if let Some(order) = e.stored_rows {
            order.check(order.rows(&e.shape)).map_err(|why| {
                ModelError::corrupt(
                    &e.file,
                    format!("tensor \"{}\" has {why}", self.label(name)),
                )
            })?;
        }
        Ok((dtype, bytes, e))
    }

    /// The tensor converted (dequantized) to f32, row-major in its HF shape.
    pub fn read_f32(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        let (dtype, bytes, e) = self.stored(name)?;
        let mut data = dequant::to_f32(dtype, bytes);
        let numel: usize = e.shape.iter().product();
        if data.len() != numel {
            return Err(ModelError::corrupt(
                &e.file,
                format!(
                    "tensor \"{}\" decoded to {} elements, expected {numel}",
                    self.label(name),
                    data.len()
                ),
            ));
        }
        if let Some(order) = e.stored_rows {
            data = order.reorder(&data, order.rows(&e.shape), false);
        }
        if e.transposed {
            data = transpose(&data, &e.shape, 1);
        }
        Ok(data)
    }

    /// The tensor's bytes as stored (GGML blocks for quantized types, little-endian floats
    /// otherwise), rows in HF order: rows are whole blocks, so un-permuting moves whole rows.
    pub fn read_raw(&self, name: &str) -> Result<(DType, Vec<u8>), ModelError> {
        let (dtype, bytes, e) = self.stored(name)?;
        let numel: usize = e.shape.iter().product();
        let cols = e.shape.last().copied().unwrap_or(1);
        if cols % dtype.block_size() != 0 || bytes.len() != dtype.byte_len(numel) {
            return Err(ModelError::corrupt(
                &e.file,
                format!(
                    "tensor \"{}\" of {numel} {} elements in rows of {cols} has {} bytes",
                    self.label(name),
                    dtype.name(),
                    bytes.len()
                ),
            ));
        }
        if e.transposed {
            // (Only a folder's float matrices are stored transposed: one element a block.)
            let width = dtype.byte_len(dtype.block_size());
            return Ok((dtype, transpose(bytes, &e.shape, width)));
        }
        Ok(match e.stored_rows {
            Some(order) => (dtype, order.reorder(bytes, order.rows(&e.shape), false)),
            None => (dtype, bytes.to_vec()),
        })
    }

    /// One f32 tensor `name` of shape `[parts.len(), n]` from the `parts`, each of `n` values,
    /// which are gone from the index after (StableLM 2 12B's per-head gains). Nothing where
    /// none of the parts is there (the model's own check names what is missing); a part
    /// missing from a partial set, or one of another length, is an error naming it.
    pub(crate) fn stack(&mut self, name: &str, parts: &[String]) -> Result<(), ModelError> {
        if !parts.iter().any(|p| self.contains(p)) {
            return Ok(());
        }
        let rows = (parts.iter())
            .map(|p| self.read_f32(p))
            .collect::<Result<Vec<_>, _>>()?;
        let n = rows[0].len();
        if let Some(p) = (parts.iter().zip(&rows)).find_map(|(p, r)| (r.len() != n).then_some(p)) {
            return Err(ModelError::corrupt(
                self.entry(p)?.file.clone(),
                format!("tensor \"{p}\" is not as long as \"{}\" ({n})", parts[0]),
            ));
        }
        let file = self.entry(&parts[0])?.file.clone();
        let bytes: Vec<u8> = rows
            .iter()
            .flatten()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let len = bytes.len();
        let storage = self.add_storage(Storage::Owned(bytes));
        for p in parts {
            self.entries.remove(p);
        }
        let entry = Entry {
            storage,
            offset: 0,
            len,
            dtype: StoredType::Supported(DType::F32),
            shape: vec![parts.len(), n],
            stored_rows: None,
            transposed: false,
            file,
        };
        self.insert(name.to_string(), entry);
        Ok(())
    }

    /// Marks q or k tensor `name` as stored with its rotary pairs side by side (GLM's
    /// layout), to be put back in the order kiln runs on every read. A missing tensor is left
    /// for the model's own check to name.
    pub(crate) fn set_interleaved(&mut self, name: &str, il: Interleaved) {
        self.set_stored_rows(name, StoredRows::Interleaved(il));
    }

    /// Marks tensor `name` as stored with its rows in `order`, to be put in the order kiln
    /// runs on every read. A missing tensor is left for the model's own check to name.
    pub(crate) fn set_stored_rows(&mut self, name: &str, order: StoredRows) {
        if let Some(e) = self.entries.get_mut(name) {
            e.stored_rows = Some(order);
        }
    }

    /// Marks matrix `name` as stored transposed, `[in, out]` (GPT-2's `Conv1D`), to be turned
    /// back on every read; its shape becomes kiln's, `[out, in]`. A missing tensor, or one of
    /// another number of dimensions (which the model's own check names), is left as it is.
    pub(crate) fn set_transposed(&mut self, name: &str) {
        if let Some(e) = self.entries.get_mut(name)
            && let [cols, rows] = e.shape[..]
        {
            e.shape = vec![rows, cols];
            e.transposed = true;
        }
    }

    /// Every tensor indexed under the name `to_kiln` gives (those it gives none keep theirs);
    /// messages name them as the files do, by `to_stored`.
    pub(crate) fn rename(
        &mut self,
        to_kiln: impl Fn(&str) -> Option<String>,
        to_stored: StoredName,
    ) {
        self.entries = std::mem::take(&mut self.entries)
            .into_iter()
            .map(|(name, e)| (to_kiln(&name).unwrap_or(name), e))
            .collect();
        self.stored_name = Some(to_stored);
    }

    /// Tensor `name` of `shape`, every value `value`, held in memory: a gain the model's files
    /// do not store (OLMo's LayerNorms have none).
    pub(crate) fn insert_constant(&mut self, name: &str, shape: &[usize], value: f32) {
        let n: usize = shape.iter().product();
        let bytes: Vec<u8> = (0..n).flat_map(|_| value.to_le_bytes()).collect();
        let storage = self.add_storage(Storage::Owned(bytes));
        let file = self.source.clone();
        self.insert(
            name.to_string(),
            Entry {
                storage,
                offset: 0,
                len: n * 4,
                dtype: StoredType::Supported(DType::F32),
                shape: shape.to_vec(),
                stored_rows: None,
                transposed: false,
                file,
            },
        );
    }

    /// Leaves out every tensor `keep` does not keep (a multimodal folder's vision tower).
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.entries.retain(|name, _| keep(name));
    }

    /// Tensor `name` as messages name it: as its file does.
    pub(crate) fn label(&self, name: &str) -> String {
        (self.stored_name.as_ref().and_then(|f| f(name))).unwrap_or_else(|| name.to_string())
    }
}

/// The `[rows, cols]` matrix (`shape`) whose elements, each `width` values of `data`, are
/// stored as its transpose, `[cols, rows]`.
fn transpose<T: Copy>(data: &[T], shape: &[usize], width: usize) -> Vec<T> {
    let (rows, cols) = (shape[0], shape[1]);
    let mut out = Vec::with_capacity(data.len());
    for r in 0..rows {
        for c in 0..cols {
            out.extend_from_slice(&data[(c * rows + r) * width..][..width]);
        }
    }
    out
}
