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
            stored_rows: None,
            transposed: false,
            file: file.to_string(),
        };
        entries.extend(stacked_parts(&name, entry));
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

/// Tensors that hold several of kiln's under one name, read as their parts (each a
/// contiguous range of rows, under the names the models use): a mixture's experts stacked in
/// three dimensions (experts x rows x columns), as transformers 5 saves every mixture
/// (`mlp.experts.gate_up_proj`: each expert's gate rows, then its up rows;
/// `mlp.experts.down_proj`) and Granite's files always have (`block_sparse_moe.input_linear`,
/// `.output_linear`); Granite's shared expert's gate and up in one matrix
/// (`shared_mlp.input_linear`) and its down (`shared_mlp.output_linear`); and the name
/// transformers 5 gives Granite's router. Anything else is itself.
fn stacked_parts(name: &str, entry: Entry) -> Vec<(String, Entry)> {
    let experts = |base: &str, kinds: &[&str], e: Entry| -> Vec<(String, Entry)> {
        let n = e.shape[0];
        (0..n)
            .flat_map(|x| {
                let expert = e.part(x, n);
                (0..kinds.len()).map(move |k| (x, k, expert.part(k, kinds.len())))
            })
            .map(|(x, k, part)| (format!("{base}.experts.{x}.{}_proj.weight", kinds[k]), part))
            .collect()
    };
    let rows = |base: &str, kinds: &[&str], e: Entry| -> Vec<(String, Entry)> {
        (0..kinds.len())
            .map(|k| {
                (
                    format!("{base}.{}_proj.weight", kinds[k]),
                    e.part(k, kinds.len()),
                )
            })
            .collect()
    };
    let three = entry.shape.len() == 3;
    let two = entry.shape.len() == 2;
    if let Some(base) = name.strip_suffix(".experts.gate_up_proj").filter(|_| three) {
        return experts(base, &["gate", "up"], entry);
    }
    if let Some(base) = name.strip_suffix(".experts.down_proj").filter(|_| three) {
        return experts(base, &["down"], entry);
    }
    if let Some(base) = name.strip_suffix(".input_linear.weight") {
        if base.ends_with("block_sparse_moe") && three {
            return experts(base, &["gate", "up"], entry);
        }
        if base.ends_with("shared_mlp") && two {
            return rows(base, &["gate", "up"], entry);
        }
    }
    if let Some(base) = name.strip_suffix(".output_linear.weight") {
        if base.ends_with("block_sparse_moe") && three {
            return experts(base, &["down"], entry);
        }
        if base.ends_with("shared_mlp") && two {
            return rows(base, &["down"], entry);
        }
    }
    if let Some(base) = name.strip_suffix("block_sparse_moe.router.weight") {
        return vec![(format!("{base}block_sparse_moe.router.layer.weight"), entry)];
    }
    vec![(name.to_string(), entry)]
}
