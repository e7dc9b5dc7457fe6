//! The KV export format: what `GET /v1/kv_transfer/{request_id}` answers.
//!
//! `kiln-kv 2\n`, a little-endian u32 length, a JSON [`Header`] of that length, then the raw
//! K/V: `bytes_per_block` bytes per block in the header's order, each block every layer's K
//! slots then every layer's V slots, as the cache holds them (f16 pairs or f32; each head of K
//! in the rotary pair layout, which version 1 did not have). Each block
//! carries its chained prefix-cache hash, its parent's, its tokens and a checksum of its
//! bytes, so the receiver can check every block against the prompt and its own hashes.

use std::hash::{DefaultHasher, Hasher};

use serde::{Deserialize, Serialize};

const MAGIC: &[u8] = b"kiln-kv 2\n";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Header {
    /// The producer's served model name.
    pub model: String,
    pub engine_id: String,
    pub request_id: String,
    /// `f16` or `f32`.
    pub dtype: String,
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
    pub bytes_per_block: usize,
    pub blocks: Vec<BlockHeader>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BlockHeader {
    /// The block's chained prefix-cache hash.
    pub hash: u64,
    /// The previous block's hash (`None` for the first).
    pub parent: Option<u64>,
    pub tokens: Vec<u32>,
    /// [`checksum`] of the block's bytes.
    pub checksum: u64,
}

/// A 64-bit hash of a block's bytes, to catch a block damaged or altered on the way.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

pub fn encode(header: &Header, data: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a header serializes");
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(data);
    out
}

/// The header and the raw K/V of an export body, checked for shape (not for content).
pub fn decode(body: &[u8]) -> Result<(Header, &[u8]), String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or("not a kiln KV export of this version (bad magic)")?;
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or("truncated KV export header")?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return Err("truncated KV export header".into());
    }
    let header: Header =
        serde_json::from_slice(&rest[..len]).map_err(|e| format!("bad KV export header: {e}"))?;
    let data = &rest[len..];
    if data.len() != header.blocks.len() * header.bytes_per_block {
        return Err(format!(
            "KV export holds {} bytes for {} blocks of {}",
            data.len(),
            header.blocks.len(),
            header.bytes_per_block
        ));
    }
    Ok((header, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let data: Vec<u8> = (0..64u8).collect();
        let header = Header {
            model: "m".into(),
            engine_id: "e".into(),
            request_id: "7".into(),
            dtype: "f16".into(),
            layers: 1,
            kv_heads: 1,
            head_dim: 2,
            block_size: 16,
            bytes_per_block: 32,
            blocks: (0..2)
                .map(|i| BlockHeader {
                    hash: i,
                    parent: i.checked_sub(1),
                    tokens: vec![1; 16],
                    checksum: checksum(&data[i as usize * 32..][..32]),
                })
                .collect(),
        };
        let body = encode(&header, &data);
        let (h, d) = decode(&body).unwrap();
        assert_eq!((h, d), (header, &data[..]));
        assert!(decode(&body[..body.len() - 1]).is_err());
        assert!(decode(&body[1..]).is_err());
        assert_ne!(checksum(&data[..32]), checksum(&data[32..]));
    }
}
