//! Structured output requests: OpenAI's `response_format` (`text`, `json_object`,
//! `json_schema`) and vLLM's `structured_outputs` (`json`, `regex`, `choice`, `grammar` in
//! Lark) turned into an engine [`Grammar`], and compiled into one matcher per choice. A schema
//! or grammar llguidance cannot compile is a 400 naming the problem.

use kiln_engine::{Constraint, ConstraintFactory, Grammar};
use serde_json::Value;

use crate::error::ApiError;
use crate::state::AppState;

/// The grammar a request asks for, if any.
pub fn requested_grammar(
    response_format: Option<&Value>,
    structured: Option<&Value>,
) -> Result<Option<Grammar>, ApiError> {
    let rf = response_format.filter(|v| !v.is_null());
    let so = structured.filter(|v| !v.is_null());
    match (rf, so) {
        (Some(_), Some(_)) => Err(ApiError::bad_param(
            "structured_outputs",
            "give either response_format or structured_outputs, not both",
        )),
        (Some(rf), None) => response_format_grammar(rf),
        (None, Some(so)) => structured_outputs_grammar(so).map(Some),
        (None, None) => Ok(None),
    }
}

fn response_format_grammar(rf: &Value) -> Result<Option<Grammar>, ApiError> {
    let bad = |m: String| ApiError::bad_param("response_format", m);
    let kind = rf
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("response_format needs a string `type`".into()))?;
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(Grammar::JsonObject)),
        "json_schema" => {
            let js = rf.get("json_schema").ok_or_else(|| {
                bad("response_format of type json_schema needs `json_schema`".into())
            })?;
            if js.get("name").and_then(Value::as_str).is_none() {
                return Err(bad(
                    "response_format.json_schema needs a string `name`".into()
                ));
            }
            match js.get("schema") {
                None | Some(Value::Null) => Ok(Some(Grammar::JsonSchema(serde_json::json!({})))),
                Some(s @ (Value::Object(_) | Value::Bool(_))) => {
                    Ok(Some(Grammar::JsonSchema(s.clone())))
                }
                Some(_) => Err(bad(
                    "response_format.json_schema.schema must be a JSON schema object".into(),
                )),
            }
        }
        other => Err(bad(format!(
            "response_format type `{other}` is not supported (text, json_object, json_schema)"
        ))),
    }
}

fn structured_outputs_grammar(so: &Value) -> Result<Grammar, ApiError> {
    let bad = |m: String| ApiError::bad_param("structured_outputs", m);
    let obj = so
        .as_object()
        .ok_or_else(|| bad("structured_outputs must be an object".into()))?;
    let set: Vec<(&String, &Value)> = obj
        .iter()
        .filter(|(_, v)| !v.is_null() && **v != Value::Bool(false))
        .collect();
    let [(key, v)] = set[..] else {
        return Err(bad(
            "structured_outputs needs exactly one of json, regex, choice, grammar, json_object"
                .into(),
        ));
    };
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| bad(format!("structured_outputs.{key} must be a string")))
    };
    match key.as_str() {
        "json" => match v {
            Value::String(s) => serde_json::from_str(s)
                .map(Grammar::JsonSchema)
                .map_err(|e| bad(format!("structured_outputs.json is not JSON: {e}"))),
            Value::Object(_) | Value::Bool(_) => Ok(Grammar::JsonSchema(v.clone())),
            _ => Err(bad("structured_outputs.json must be a JSON schema".into())),
        },
        "json_object" => Ok(Grammar::JsonObject),
        "regex" => text(v).map(Grammar::Regex),
        "grammar" => text(v).map(Grammar::Lark),
        "choice" => {
            let c: Option<Vec<String>> = v
                .as_array()
                .map(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or(None);
            match c {
                Some(c) if !c.is_empty() => Ok(Grammar::Choice(c)),
                _ => Err(bad(
                    "structured_outputs.choice must be a non-empty list of strings".into(),
                )),
            }
        }
        other => Err(bad(format!(
            "structured_outputs.{other} is not supported (json, regex, choice, grammar, json_object)"
        ))),
    }
}

impl AppState {
    /// The model's grammar compiler, built on first use.
    pub fn constraint_factory(&self) -> Result<&ConstraintFactory, ApiError> {
        self.constraints
            .get_or_init(|| {
                ConstraintFactory::new(
                    &self.model.tokenizer,
                    &self.model.eos_token_ids,
                    self.model.vocab_size,
                )
            })
            .as_ref()
            .map_err(|e| ApiError::internal(e.clone()))
    }

    /// `n` matchers for `grammar` (one per choice); `param` names the field in a 400.
    pub fn compile(
        &self,
        grammar: &Grammar,
        n: usize,
        param: &str,
    ) -> Result<Vec<Constraint>, ApiError> {
        let f = self.constraint_factory()?;
        (0..n)
            .map(|_| {
                f.compile(grammar).map_err(|e| {
                    ApiError::bad_param(param, format!("the {param} cannot be compiled: {e}"))
                })
            })
            .collect()
    }
}
