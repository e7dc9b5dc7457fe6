//! Backing bytes of a model file: a read-only memory map (native) or an owned buffer
//! (browser / in-memory loading). Tensors are sliced out of it lazily, never copied up front.

use std::path::Path;

use crate::ModelError;

pub(crate) enum Storage {
    #[cfg(not(target_arch = "wasm32"))]
    Mmap(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            Storage::Mmap(m) => m,
            Storage::Owned(v) => v,
        }
    }

    /// Memory-maps `path` read-only.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn map(path: &Path) -> Result<Storage, ModelError> {
        let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
        // SAFETY: the map is read-only; like every mmap-based loader we assume the model file
        // is not truncated or rewritten by another process while it is loaded.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_error(path, e))?;
        Ok(Storage::Mmap(map))
    }

    /// Without mmap (wasm32), read the file into memory.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn map(path: &Path) -> Result<Storage, ModelError> {
        std::fs::read(path)
            .map(Storage::Owned)
            .map_err(|e| io_error(path, e))
    }
}

/// Maps an I/O error on `path` to `MissingFile` (not found) or `Io`.
pub(crate) fn io_error(path: &Path, e: std::io::Error) -> ModelError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ModelError::MissingFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
    } else {
        ModelError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

/// Reads a whole small text file (config / tokenizer JSON).
pub(crate) fn read_text(path: &Path) -> Result<String, ModelError> {
    std::fs::read_to_string(path).map_err(|e| io_error(path, e))
}
