//! [`WebEngine::start_embedding`]: an input's embedding, as the server's `/v1/embeddings`
//! computes it (kiln-frontend's `embedding.rs`): the prefill of a one-token request whose
//! final hidden state at the input's last token comes back scaled to unit length.

use super::*;

#[wasm_bindgen]
impl WebEngine {
    /// Starts embedding `input` (token ids) and returns its id. Its one event carries
    /// `embedding` (a `Float32Array` of the model's width, unit length) and `promptTokens`,
    /// with `finished` set; its sampled token is dropped (`text` is empty). It starts at the
    /// next `step()`, batched with the generations running.
    pub fn start_embedding(
        &mut self,
        input: Vec<u32>,
        on_event: Option<Function>,
    ) -> Result<f64, JsValue> {
        let f = &self.frontend;
        f.check_embedding_input(&input, self.max_len, 0)
            .map_err(err)?;
        let spec = f.embedding_spec();
        let id = self.next_id;
        self.next_id += 1;
        let prompt_tokens = input.len() as u32;
        let request = f.request(&spec, id, input, 1, 0, 0);
        let chat = Chat {
            text: spec.text_stream(),
            split: ReasoningFormat::None.stream(false),
            callback: on_event,
            num_tokens: 0,
            prompt_tokens,
            logprobs: None,
            tools: None,
            embedding: true,
        };
        self.pending
            .borrow_mut()
            .push_back(Command::Start(Box::new(Start {
                request,
                chat,
                constraint: None,
                lora: None,
            })));
        Ok(id as f64)
    }
}
