//! Embeddings as every front end computes them: an input's embedding is the model's final
//! hidden state (after its last norm) at the input's last token, scaled to unit length, the
//! pooling of decoder-only embedding models (Qwen3-Embedding's, e5-mistral's). The engine
//! computes it as the prefill of a one-token request ([`Frontend::embedding_spec`]), batched
//! with everything else; the token is sampled and dropped.

use crate::{Frontend, GenSpec, GenerationParams, ParamError};

impl Frontend {
    /// The spec of an embedding request: greedy, one token (never shown), the prefill's last
    /// hidden state returned.
    pub fn embedding_spec(&self) -> GenSpec {
        let params = GenerationParams {
            temperature: Some(0.0),
            ignore_eos: Some(true),
            max_tokens: Some(1),
            ..GenerationParams::default()
        };
        let mut spec = self
            .resolve(&params, None)
            .expect("greedy, one token: valid parameters");
        spec.return_hidden = true;
        spec
    }

    /// Checks input `index` (token ids) against the vocabulary and a context of `max_len`
    /// tokens, of which the one sampled token takes the last.
    pub fn check_embedding_input(
        &self,
        ids: &[u32],
        max_len: usize,
        index: usize,
    ) -> Result<(), ParamError> {
        let most = max_len.saturating_sub(1);
        if ids.len() > most {
            return Err(ParamError::new(
                "input",
                format!(
                    "input {index} has {} tokens; this model embeds at most {most}",
                    ids.len()
                ),
            ));
        }
        self.check_prompt(ids, max_len, Some(1), None)
            .map(|_| ())
            .map_err(|e| ParamError::new("input", format!("input {index}: {}", e.message)))
    }
}

/// `hidden` scaled to unit length (a zero vector stays zero).
pub fn unit_length(mut hidden: Vec<f32>) -> Vec<f32> {
    let norm = hidden.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    hidden.iter_mut().for_each(|x| *x /= norm);
    hidden
}
