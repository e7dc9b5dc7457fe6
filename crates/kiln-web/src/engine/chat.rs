//! [`WebEngine::start_chat`]: a chat reply from OpenAI's chat messages, with tools: the
//! conversation rendered by the shared front end (the tools described to the model, past calls
//! and tool results in their turns), the reply held to the tools' grammar and read back as
//! calls, as the server's chat completions read it.

use kiln_frontend::Ending;
use kiln_frontend::tools::ChatTurn;

use super::*;

#[wasm_bindgen]
impl WebEngine {
    /// Starts the assistant's reply to a chat and returns its id. `messages_json`: OpenAI's
    /// chat messages as JSON text (`role`, `content` as text or text parts, an assistant turn's
    /// `tool_calls` and `reasoning_content`, a tool message's `tool_call_id`); `params`:
    /// `start`'s fields and chat's `tools`, `tool_choice`, `parallel_tool_calls` and
    /// `chat_template_kwargs` (variables for the chat template). Events are
    /// `start`'s, with `promptTokens`; where tools are offered, each event's `deltas` are the
    /// chat deltas its text adds (`{content}` or `{tool_calls: [{index, id, type, function}]}`,
    /// as the server streams them; `text` stays the raw reply), `finished` is `tool_calls`
    /// once the reply called a tool (`stop` for a named function), and the last event's
    /// `reply` is the whole reply parsed as the server's unstreamed one is: `{content,
    /// tool_calls, finish_reason}`.
    pub fn start_chat(
        &mut self,
        messages_json: &str,
        params: JsValue,
        on_token: Option<Function>,
    ) -> Result<f64, JsValue> {
        let turns: Vec<ChatTurn> =
            serde_json::from_str(messages_json).map_err(|e| err(format!("messages: {e}")))?;
        let mut params = start_params(&params)?;
        let f = &self.frontend;
        let plan = ToolPlan::parse(
            params.tools.take().as_ref(),
            params.tool_choice.take().as_ref(),
            params.parallel_tool_calls.take(),
            f.tool_format,
        )
        .map_err(err)?
        .filter(ToolPlan::active);
        let kwargs = params.chat_template_kwargs.take();
        let text = f
            .render_turns(turns, plan.as_ref(), kwargs.as_ref(), Ending::NewTurn)
            .map_err(err)?;
        let prompt = f.encode(&text, false, "messages").map_err(err)?;
        self.begin(prompt, params, plan, on_token)
    }
}
