//! Indexes the tensors of a `.safetensors` file (f32 / f16 / bf16) into [`Weights`] without
//! reading their data.

use safetensors::{Dtype, SafeTensors};

use crate::ModelError;
use crate::gguf::dequant::DType;
use crate::storage::Storage;
use crate::weights::{Entry, StoredType, Weights};

/// Adds every tensor of `storage` (the file `file`) to `weights`.
pub(crate) fn index_file(
    weights: &mut Weights,
    storage: Storage,
    file: &str,
) -> Result<(), ModelError> {
    let idx = weights.add_storage(storage);
    let bytes = weights.storage_bytes(idx);
    let total = bytes.len();
    let (header_len, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|e| ModelError::corrupt(file, format!("bad safetensors header: {e}")))?;
    let base = 8 + header_len;
    let mut entries = Vec::new();
    for (name, info) in meta.tensors() {
        let numel: usize = info.shape.iter().product();
        let (start, end) = info.data_offsets;
        let dtype = match info.dtype {
            Dtype::F32 => StoredType::Supported(DType::F32),
            Dtype::F16 => StoredType::Supported(DType::F16),
            Dtype::BF16 => StoredType::Supported(DType::BF16),
            other => StoredType::Unsupported(format!("{other:?}")),
        };
        if let StoredType::Supported(d) = dtype {
            if end < start || end - start != d.byte_len(numel) {
                return Err(ModelError::corrupt(
                    file,
                    format!(
                        "tensor \"{name}\" has {} bytes for shape {:?}",
                        end.saturating_sub(start),
                        info.shape
                    ),
                ));
            }
        }
        if base + end > total {
            return Err(ModelError::corrupt(
                file,
                format!(
                    "file is truncated: tensor \"{name}\" ends at byte {} of {total}",
                    base + end
                ),
            ));
        }
        let entry = Entry {
            storage: idx,
            offset: base + start,
            len: end - start,
            dtype,
            shape: info.shape.clone(),
            interleaved: None,
            file: file.to_string(),
        };
        entries.push((name, entry));
    }
    for (name, entry) in entries {
        // Shards of one model hold each tensor once.
        if let Some(other) = weights.file_of(&name) {
            return Err(ModelError::corrupt(
                file,
                format!("tensor \"{name}\" is also in {other}"),
            ));
        }
        weights.insert(name, entry);
    }
    Ok(())
}
