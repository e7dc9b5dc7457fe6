//! The structured-output flags `generate` and `chat` share: the CLI's spelling of vLLM's
//! `structured_outputs`, read by the same front-end code as the server's request field.

use anyhow::Context;
use kiln_engine::Grammar;
use kiln_frontend::requested_grammar;
use serde_json::{Value, json};

#[derive(clap::Args, Clone, Debug, Default)]
#[group(multiple = false)]
pub struct OutputArgs {
    /// Reply with a JSON object.
    #[arg(long)]
    json: bool,
    /// Reply with JSON valid under this JSON schema (the schema itself, or @FILE).
    #[arg(long, value_name = "SCHEMA")]
    json_schema: Option<String>,
    /// Reply with text that this regular expression matches whole.
    #[arg(long)]
    regex: Option<String>,
    /// Reply with exactly one of these strings; repeat the flag for each.
    #[arg(long)]
    choice: Vec<String>,
    /// Reply in this grammar, in llguidance's Lark syntax (the grammar itself, or @FILE).
    #[arg(long)]
    grammar: Option<String>,
    /// Reply with free text and tags in this structural tag (vLLM's `structural_tag`: its
    /// `structures` and `triggers`, or a `format` tree; the JSON itself, or @FILE).
    #[arg(long, value_name = "JSON")]
    structural_tag: Option<String>,
}

/// `arg` itself, or the text of the file it names after an `@`.
fn text_or_file(arg: &str) -> anyhow::Result<String> {
    match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {path}")),
        None => Ok(arg.to_string()),
    }
}

impl OutputArgs {
    /// The grammar the flags ask for, if any.
    pub fn grammar(&self) -> anyhow::Result<Option<Grammar>> {
        let asked = if self.json {
            json!({"json_object": true})
        } else if let Some(s) = &self.json_schema {
            let schema: Value =
                serde_json::from_str(&text_or_file(s)?).context("--json-schema is not JSON")?;
            json!({ "json": schema })
        } else if let Some(r) = &self.regex {
            json!({ "regex": r })
        } else if !self.choice.is_empty() {
            json!({ "choice": self.choice })
        } else if let Some(g) = &self.grammar {
            json!({ "grammar": text_or_file(g)? })
        } else if let Some(t) = &self.structural_tag {
            json!({ "structural_tag": text_or_file(t)? })
        } else {
            return Ok(None);
        };
        Ok(requested_grammar(None, Some(&asked))?)
    }
}
