//! [`WebEngine::start`]: a generation from token ids, and what every kind of start shares
//! (`begin`): the parameters checked by the shared front end, the prompt against the context,
//! the output's grammar (structured output or tools), the request queued for the next step.

use super::*;

#[wasm_bindgen]
impl WebEngine {
    /// Starts a generation of `prompt` (token ids) and returns its id. `params` takes the
    /// server's generation fields: `{temperature, top_p, top_k, min_p, repetition_penalty,
    /// presence_penalty, frequency_penalty, seed, max_tokens, stop, ignore_eos}`, and the
    /// structured-output fields `response_format` and `structured_outputs` (the output is then
    /// constrained to match on the GPU, after the reasoning of a model that reasons), and
    /// `reasoning` (`think` or `none`: whether a `<think>` block goes to `event.reasoning`
    /// apart from `event.text`; by default where the chat template knows the tags),
    /// `thinking_token_budget` (at most that many tokens of reasoning), and chat's
    /// `logprobs` and `top_logprobs` (`event.logprobs`: the token's entry as OpenAI's chat
    /// writes it, with its alternatives), and `lora` (an adapter `loadModel` loaded, by
    /// name); unset ones
    /// come from the model's generation config, then kiln's defaults; an unknown field is an
    /// error (tools and `chat_template_kwargs` too: they go to [`WebEngine::start_chat`],
    /// which renders them into the prompt). `on_token(event)` is called for every new token and once at the end
    /// (`event.finished` set). It starts at the next `step()`.
    pub fn start(
        &mut self,
        prompt: Vec<u32>,
        params: JsValue,
        on_token: Option<Function>,
    ) -> Result<f64, JsValue> {
        let params = start_params(&params)?;
        if let Some(field) = params.chat_field() {
            return Err(err(format!(
                "{field}: a chat's field, given to start_chat, which renders it into the prompt"
            )));
        }
        self.begin(prompt, params, None, on_token)
    }
}

impl WebEngine {
    /// Queues generation of `prompt` with `params`, its reply read as `plan`'s calls where
    /// the request has tools.
    pub(super) fn begin(
        &mut self,
        mut prompt: Vec<u32>,
        params: StartParams,
        plan: Option<ToolPlan>,
        on_token: Option<Function>,
    ) -> Result<f64, JsValue> {
        let f = &self.frontend;
        let logprobs = chat_logprobs(params.logprobs, params.top_logprobs).map_err(err)?;
        let mut spec = f.resolve(&params.generation, logprobs).map_err(err)?;
        if let Some(name) = &params.lora {
            let names = &self.loras.borrow().names;
            if !names.contains(name) {
                return Err(err(format!(
                    "lora: no adapter named `{name}` is loaded (loaded: {})",
                    names.join(", ")
                )));
            }
        }
        if spec.n != 1 {
            return Err(err("n must be 1: start one generation per call"));
        }
        if spec.prompt_logprobs.is_some() {
            return Err(err(
                "prompt_logprobs is served by kiln's server, not in the page",
            ));
        }
        // Calls in a format marked by special tokens are read from text that keeps them.
        if plan
            .as_ref()
            .is_some_and(|p| p.format.keeps_special_tokens())
        {
            spec.skip_special_tokens = false;
        }
        spec.truncate(&mut prompt);
        let max_tokens = f
            .check_prompt(
                &prompt,
                self.max_len,
                spec.max_tokens,
                Some(DEFAULT_MAX_TOKENS),
            )
            .map_err(err)?;
        let requested = requested_grammar(
            params.response_format.as_ref(),
            params.structured_outputs.as_ref(),
        )
        .map_err(err)?;
        let grammar = match (&plan, requested) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "response_format: cannot be combined with tools unless tool_choice is none",
                ));
            }
            (Some(p), None) => Some(p.grammar()),
            (None, g) => g,
        };
        let reasoning = match params.reasoning.as_deref() {
            None => ReasoningFormat::detect(f.chat_template.as_ref()),
            Some("think") => ReasoningFormat::Think,
            Some("harmony") => ReasoningFormat::Harmony,
            Some("none") => ReasoningFormat::None,
            Some(other) => {
                return Err(err(format!(
                    "reasoning: `{other}` is not one of think, harmony, none"
                )));
            }
        };
        let opened = reasoning.opened_by_ids(&f.tokenizer, &prompt);
        let constraint = match reasoning.constrain(grammar, opened, params.thinking_token_budget) {
            Some(g) => Some(self.compile(&g)?),
            None => None,
        };
        let seed = spec
            .seed
            .unwrap_or_else(|| (js_sys::Math::random() * 9007199254740991.0) as u64);
        let id = self.next_id;
        self.next_id += 1;
        let prompt_tokens = prompt.len() as u32;
        let request = f.request(&spec, id, prompt, max_tokens, seed, 0);
        let chat = Chat {
            text: spec.text_stream(),
            split: reasoning.stream(opened),
            callback: on_token,
            num_tokens: 0,
            prompt_tokens,
            logprobs,
            tools: plan.map(ChatTools::new),
            embedding: false,
        };
        self.pending
            .borrow_mut()
            .push_back(Command::Start(Box::new(Start {
                request,
                chat,
                constraint,
                lora: params.lora.clone(),
            })));
        Ok(id as f64)
    }
}
