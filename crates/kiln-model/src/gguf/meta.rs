//! A GGUF file's metadata, read by key: strings, numbers, and a per-layer array's first
//! value.

use std::collections::HashMap;

use super::reader::MetaValue;
use crate::ModelError;

/// A GGUF file's metadata; `file` names it in errors.
pub(crate) struct Meta<'a> {
    pub map: &'a HashMap<String, MetaValue>,
    pub file: &'a str,
}

impl Meta<'_> {
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.map.get(key)
    }
    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(MetaValue::as_str)
    }
    /// Integer; an array (per-layer values) yields its first element.
    pub fn usize(&self, key: &str) -> Option<usize> {
        match self.get(key)? {
            MetaValue::Array(a) => a.first()?.as_u64().map(|v| v as usize),
            v => v.as_u64().map(|v| v as usize),
        }
    }
    pub fn f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(MetaValue::as_f64)
    }
    pub fn req_usize(&self, key: &str) -> Result<usize, ModelError> {
        self.usize(key).ok_or_else(|| {
            ModelError::config(
                self.file,
                format!("missing or non-integer metadata \"{key}\""),
            )
        })
    }
}
