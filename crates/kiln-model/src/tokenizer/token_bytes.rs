//! The bytes each token id stands for, as grammar-constrained decoding needs them (a token
//! trie over bytes): byte-level BPE vocabularies (GPT-2 style, `Ġ` for a space) are mapped back
//! through the byte-to-character table, SentencePiece pieces turn `▁` into a space and
//! `<0xNN>` into the byte, and special tokens get the marker byte 0xFF in front of their
//! text, so that no text can ever spell them.

use std::collections::HashMap;

use super::Tokenizer;

/// GPT-2's printable stand-ins for the 256 byte values, inverted.
fn byte_level_inverse() -> HashMap<char, u8> {
    let mut printable: Vec<u8> = (b'!'..=b'~')
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut map: HashMap<char, u8> = printable.iter().map(|&b| (char::from(b), b)).collect();
    let mut n = 0u32;
    for b in 0..=255u8 {
        if !printable.contains(&b) {
            map.insert(char::from_u32(256 + n).unwrap(), b);
            n += 1;
            printable.push(b);
        }
    }
    map
}

impl Tokenizer {
    /// Bytes of every token id, `0..vocab_size()`; ids with no token get an empty vector.
    pub fn token_bytes(&self) -> Vec<Vec<u8>> {
        let byte_level = self
            .inner
            .get_decoder()
            .and_then(|d| serde_json::to_string(d).ok())
            .is_some_and(|s| s.contains("ByteLevel"));
        let inverse = byte_level_inverse();
        (0..self.vocab_size() as u32)
            .map(|id| {
                let Some(piece) = self.inner.id_to_token(id) else {
                    return Vec::new();
                };
                if self.is_special(id) {
                    let mut b = vec![0xFF];
                    b.extend_from_slice(piece.as_bytes());
                    return b;
                }
                if byte_level {
                    if let Some(bytes) = piece
                        .chars()
                        .map(|c| inverse.get(&c).copied())
                        .collect::<Option<Vec<u8>>>()
                    {
                        return bytes;
                    }
                    return piece.into_bytes();
                }
                if piece.len() == 6 && piece.starts_with("<0x") && piece.ends_with('>') {
                    if let Ok(b) = u8::from_str_radix(&piece[3..5], 16) {
                        return vec![b];
                    }
                }
                piece.replace('\u{2581}', " ").into_bytes()
            })
            .collect()
    }
}
