//! Incremental detokenization: text for each new token as soon as it is whole, never half a
//! UTF-8 character (a byte-level token can end mid-character; such text waits for the next).

use kiln_model::{ModelError, Tokenizer};

/// Turns a growing list of token ids into text deltas.
#[derive(Default, Clone, Debug)]
pub struct IncrementalDecoder {
    ids: Vec<u32>,
    /// Start of the window decoded for context (decoders may treat a leading token specially).
    prefix_offset: usize,
    /// End of the text already returned.
    read_offset: usize,
    skip_special: bool,
}

impl IncrementalDecoder {
    pub fn new(skip_special_tokens: bool) -> Self {
        Self {
            skip_special: skip_special_tokens,
            ..Self::default()
        }
    }

    /// Adds `id` and returns the text it completes (possibly empty).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<String, ModelError> {
        self.ids.push(id);
        let prefix = tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.skip_special,
        )?;
        let full = tokenizer.decode(&self.ids[self.prefix_offset..], self.skip_special)?;
        if full.len() > prefix.len() && !full.ends_with('\u{FFFD}') && full.starts_with(&prefix) {
            let delta = full[prefix.len()..].to_string();
            self.prefix_offset = self.read_offset;
            self.read_offset = self.ids.len();
            Ok(delta)
        } else {
            Ok(String::new())
        }
    }

    /// Whatever text is still held back (at the end of generation).
    pub fn flush(&mut self, tokenizer: &Tokenizer) -> Result<String, ModelError> {
        let prefix = tokenizer.decode(
            &self.ids[self.prefix_offset..self.read_offset],
            self.skip_special,
        )?;
        let full = tokenizer.decode(&self.ids[self.prefix_offset..], self.skip_special)?;
        self.prefix_offset = self.ids.len();
        self.read_offset = self.ids.len();
        Ok(full.get(prefix.len()..).unwrap_or_default().to_string())
    }
}
