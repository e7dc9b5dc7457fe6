//! Chat templates: the model's Jinja template rendered with minijinja the way Hugging Face
//! transformers does (trim_blocks + lstrip_blocks, `bos_token` / `eos_token`, `raise_exception`,
//! `tojson`, Python string methods such as `.strip()`).

use minijinja::{Environment, ErrorKind, context};
use serde::{Deserialize, Serialize};

use crate::ModelError;

/// One chat turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

pub struct ChatTemplate {
    env: Environment<'static>,
    template: String,
    bos_token: String,
    eos_token: String,
    origin: String,
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
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
            },
        );
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
        let err = |e: minijinja::Error| ModelError::ChatTemplate {
            file: self.origin.clone(),
            reason: format!("{e:#}"),
        };
        let tmpl = self.env.get_template(NAME).map_err(err)?;
        tmpl.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        })
        .map_err(err)
    }

    /// The template source text.
    pub fn source(&self) -> &str {
        &self.template
    }
}
