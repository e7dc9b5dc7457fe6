//! Chat templates: the model's Jinja template rendered with minijinja the way Hugging Face
//! transformers renders it: trim_blocks + lstrip_blocks, loop controls, `bos_token` /
//! `eos_token`, `tools` and `documents` (`none` when absent), `raise_exception`,
//! `strftime_now`, a `tojson` that writes what Python's `json.dumps` writes, and Python's
//! string and dict methods (`.strip()`, `.items()`, ...).

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind, context};
use serde_json::Map;

use super::ChatMessage;
use super::py_json::{JsonStyle, to_python_json};
use crate::ModelError;

pub struct ChatTemplate {
    env: Environment<'static>,
    template: String,
    bos_token: String,
    eos_token: String,
    origin: String,
}

/// What one render reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChatInput<'a> {
    pub messages: &'a [ChatMessage],
    /// The request's tools in the OpenAI shape (`{"type": "function", "function": {..}}`).
    pub tools: Option<&'a [serde_json::Value]>,
    /// Append the assistant turn's header.
    pub add_generation_prompt: bool,
    /// Further template variables (the API's `chat_template_kwargs`, such as `date_string`
    /// or `enable_thinking`); the variables above take precedence.
    pub kwargs: Option<&'a Map<String, serde_json::Value>>,
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `template`. `origin` (the file it came from) is named in errors.
    pub fn new(
        template: &str,
        bos_token: &str,
        eos_token: &str,
        origin: &str,
    ) -> Result<ChatTemplate, ModelError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", |format: String| {
            chrono::Local::now().format(&format).to_string()
        });
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, template.to_string())
            .map_err(|e| ModelError::ChatTemplate {
                file: origin.into(),
                reason: format!("invalid template: {e:#}"),
            })?;
        Ok(ChatTemplate {
            env,
            template: template.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
            origin: origin.to_string(),
        })
    }

    /// Renders the conversation; `add_generation_prompt` appends the assistant turn header.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        self.render_input(&ChatInput {
            messages,
            add_generation_prompt,
            ..ChatInput::default()
        })
    }

    /// Renders with tools and extra variables.
    pub fn render_input(&self, input: &ChatInput) -> Result<String, ModelError> {
        let err = |e: Error| ModelError::ChatTemplate {
            file: self.origin.clone(),
            reason: format!("{e:#}"),
        };
        let tmpl = self.env.get_template(NAME).map_err(err)?;
        let kwargs = input.kwargs.map(Value::from_serialize).unwrap_or_default();
        let messages: Vec<TemplateMessage> =
            input.messages.iter().map(TemplateMessage::from).collect();
        tmpl.render(context! {
            messages => messages,
            tools => input.tools,
            documents => (),
            add_generation_prompt => input.add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
            ..kwargs
        })
        .map_err(err)
    }

    /// The template source text.
    pub fn source(&self) -> &str {
        &self.template
    }

    /// Whether the template reads the request's `tools` (renders tool descriptions itself).
    pub fn reads_tools(&self) -> bool {
        self.reads("tools")
    }

    /// Whether the template reads the variable `name` (setting one it does not read changes
    /// nothing).
    pub fn reads(&self, name: &str) -> bool {
        self.env
            .get_template(NAME)
            .map(|t| t.undeclared_variables(false).contains(name))
            .unwrap_or(false)
    }
}

/// A message as templates see it: its fields, and its reasoning under both names templates
/// read it by, `reasoning_content` (Qwen3's) and `thinking` (gpt-oss's, which renders a
/// tool-calling turn's reasoning back into its `analysis` channel).
#[derive(serde::Serialize)]
struct TemplateMessage<'a> {
    #[serde(flatten)]
    message: &'a ChatMessage,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
}

impl<'a> From<&'a ChatMessage> for TemplateMessage<'a> {
    fn from(message: &'a ChatMessage) -> Self {
        TemplateMessage {
            message,
            thinking: message.reasoning_content.as_deref(),
        }
    }
}

/// `tojson(indent=None, ensure_ascii=False, separators=None, sort_keys=False)`, as
/// transformers defines it over `json.dumps`.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let bad = |m: String| Error::new(ErrorKind::InvalidOperation, m);
    let indent = match kwargs.get::<Option<Value>>("indent")? {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.as_str() {
            Some(s) => s.to_string(),
            None => " ".repeat(i64::try_from(v)?.max(0) as usize),
        }),
    };
    let separators = match kwargs.get::<Option<Vec<String>>>("separators")? {
        None => None,
        Some(s) if s.len() == 2 => Some((s[0].clone(), s[1].clone())),
        Some(s) => return Err(bad(format!("separators needs 2 strings, got {}", s.len()))),
    };
    let style = JsonStyle {
        indent,
        ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
        sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
        separators,
    };
    kwargs.assert_all_used()?;
    to_python_json(value, &style).map(Value::from).map_err(bad)
}
