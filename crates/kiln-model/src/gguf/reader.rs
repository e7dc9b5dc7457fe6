//! GGUF (v2/v3) container parser: header, metadata key/values (all types, arrays included),
//! tensor infos and the aligned data section. Reads from a byte slice, copies no tensor data.

use std::collections::HashMap;

use crate::ModelError;

pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";
pub const DEFAULT_ALIGNMENT: usize = 32;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    /// GGUF value type id.
    pub fn type_id(&self) -> u32 {
        match self {
            MetaValue::U8(_) => 0,
            MetaValue::I8(_) => 1,
            MetaValue::U16(_) => 2,
            MetaValue::I16(_) => 3,
            MetaValue::U32(_) => 4,
            MetaValue::I32(_) => 5,
            MetaValue::F32(_) => 6,
            MetaValue::Bool(_) => 7,
            MetaValue::String(_) => 8,
            MetaValue::Array(_) => 9,
            MetaValue::U64(_) => 10,
            MetaValue::I64(_) => 11,
            MetaValue::F64(_) => 12,
        }
    }

    /// Any integer type (non-negative) as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any numeric type as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            MetaValue::I8(v) => Some(v as f64),
            MetaValue::I16(v) => Some(v as f64),
            MetaValue::I32(v) => Some(v as f64),
            MetaValue::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor's header entry. `dims` are GGUF order: innermost (contiguous) first.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: u32,
    /// Relative to the start of the data section.
    pub offset: u64,
}

/// A parsed GGUF header.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: HashMap<String, MetaValue>,
    pub tensors: Vec<TensorInfo>,
    /// Absolute offset of the (aligned) tensor data section.
    pub data_start: usize,
    pub alignment: usize,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    file: &'a str,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        if self.buf.len() - self.pos < n {
            return Err(ModelError::corrupt(
                self.file,
                format!(
                    "file ends at byte {} while reading {what} at offset {} (needs {n} bytes)",
                    self.buf.len(),
                    self.pos
                ),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ModelError> {
        Ok(self.take(N, what)?.try_into().expect("length checked"))
    }
    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    /// A count that must be satisfiable by the remaining bytes (each item takes >= `min_item` bytes).
    fn count(&mut self, what: &str, min_item: usize) -> Result<usize, ModelError> {
        let n = self.u64(what)?;
        let remaining = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_item as u64) > remaining {
            return Err(ModelError::corrupt(
                self.file,
                format!(
                    "{what} {n} at offset {} is larger than the rest of the file",
                    self.pos - 8
                ),
            ));
        }
        Ok(n as usize)
    }
    fn string(&mut self, what: &str) -> Result<String, ModelError> {
        let n = self.count(what, 1)?;
        let at = self.pos;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            ModelError::corrupt(
                self.file,
                format!("{what} at offset {at} is not valid UTF-8"),
            )
        })
    }
    fn value(&mut self, ty: u32, key: &str) -> Result<MetaValue, ModelError> {
        Ok(match ty {
            0 => MetaValue::U8(self.arr::<1>(key)?[0]),
            1 => MetaValue::I8(self.arr::<1>(key)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.arr(key)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.arr(key)?)),
            4 => MetaValue::U32(self.u32(key)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.arr(key)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.arr(key)?)),
            7 => MetaValue::Bool(self.arr::<1>(key)?[0] != 0),
            8 => MetaValue::String(self.string(key)?),
            9 => {
                let elem_ty = self.u32(key)?;
                let min = match elem_ty {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    _ => 8,
                };
                let n = self.count(&format!("array length of \"{key}\""), min)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(elem_ty, key)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64(key)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.arr(key)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.arr(key)?)),
            other => {
                return Err(ModelError::corrupt(
                    self.file,
                    format!("metadata \"{key}\" has unknown value type {other}"),
                ));
            }
        })
    }
}

/// Parses the header of a GGUF file held in `buf`. `file` names it in errors.
pub fn parse_header(buf: &[u8], file: &str) -> Result<GgufHeader, ModelError> {
    let mut c = Cursor { buf, pos: 0, file };
    let magic = c.take(4, "magic")?;
    if magic != GGUF_MAGIC {
        return Err(ModelError::corrupt(
            file,
            format!("not a GGUF file (magic {magic:02x?}, expected \"GGUF\")"),
        ));
    }
    let version = c.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(ModelError::Unsupported {
            file: file.into(),
            reason: format!("GGUF version {version} (supported: 2, 3)"),
        });
    }
    let n_tensors = c.count("tensor count", 24)?;
    let n_kv = c.count("metadata count", 12)?;
    let mut metadata = HashMap::with_capacity(n_kv);
    for _ in 0..n_kv {
        let key = c.string("metadata key")?;
        let ty = c.u32(&key)?;
        let v = c.value(ty, &key)?;
        metadata.insert(key, v);
    }
    let mut tensors = Vec::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name = c.string("tensor name")?;
        let n_dims = c.u32(&name)? as usize;
        if n_dims > 8 {
            return Err(ModelError::corrupt(
                file,
                format!("tensor \"{name}\" claims {n_dims} dimensions"),
            ));
        }
        let dims = (0..n_dims)
            .map(|_| c.u64(&name))
            .collect::<Result<Vec<_>, _>>()?;
        let ggml_type = c.u32(&name)?;
        let offset = c.u64(&name)?;
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
        });
    }
    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => match v.as_u64() {
            Some(a) if a > 0 && a.is_power_of_two() => a as usize,
            _ => {
                return Err(ModelError::corrupt(
                    file,
                    format!("invalid general.alignment {v:?}"),
                ));
            }
        },
    };
    let data_start = c.pos.div_ceil(alignment) * alignment;
    Ok(GgufHeader {
        version,
        metadata,
        tensors,
        data_start,
        alignment,
    })
}
