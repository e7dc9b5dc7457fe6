//! An adapter's values in host memory, or let go where the adapter's file can give them
//! again: a server with many adapters keeps only those requests use lately
//! (`--max-cpu-loras`), and reads the others again when a request needs one.

use std::sync::{Arc, Mutex, PoisonError};

use super::LoraPairs;
use crate::{ModelConfig, ModelError};

pub(super) struct Held {
    pairs: Mutex<Option<Arc<LoraPairs>>>,
    /// The model the pairs were checked against, to read them again; `None` for an adapter
    /// given as bytes, which keeps them.
    again: Option<ModelConfig>,
}

impl Held {
    pub(super) fn new(pairs: LoraPairs, again: Option<ModelConfig>) -> Self {
        Self {
            pairs: Mutex::new(Some(Arc::new(pairs))),
            again,
        }
    }

    /// The pairs, or those `read` gives for the model (stored as held) where they were let go.
    pub(super) fn get(
        &self,
        read: impl FnOnce(&ModelConfig) -> Result<Arc<LoraPairs>, ModelError>,
    ) -> Result<Arc<LoraPairs>, ModelError> {
        let mut held = self.pairs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = &*held {
            return Ok(p.clone());
        }
        let config = self
            .again
            .as_ref()
            .expect("only pairs that can be read again are let go");
        let pairs = read(config)?;
        *held = Some(pairs.clone());
        Ok(pairs)
    }

    pub(super) fn let_go(&self) -> bool {
        self.again.is_some()
            && (self.pairs.lock().unwrap_or_else(PoisonError::into_inner))
                .take()
                .is_some()
    }

    pub(super) fn is_held(&self) -> bool {
        (self.pairs.lock().unwrap_or_else(PoisonError::into_inner)).is_some()
    }
}
