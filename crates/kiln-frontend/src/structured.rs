//! Structured output requests: OpenAI's `response_format` (`text`, `json_object`,
//! `json_schema`, and vLLM's `structural_tag`) and vLLM's `structured_outputs` (`json`,
//! `regex`, `choice`, `grammar` in Lark, `structural_tag`: `structural_tag/`) turned into a
//! [`Grammar`], for every front end that takes them (the server's endpoints, the browser
//! crate's `start`). Errors name the field at fault.

use kiln_core::Grammar;
use serde_json::Value;

use crate::ParamError;
use crate::structural_tag::structural_tag_grammar;

/// The grammar a request asks for, if any.
pub fn requested_grammar(
    response_format: Option<&Value>,
    structured: Option<&Value>,
) -> Result<Option<Grammar>, ParamError> {
    let rf = response_format.filter(|v| !v.is_null());
    let so = structured.filter(|v| !v.is_null());
    match (rf, so) {
        (Some(_), Some(_)) => Err(ParamError::new(
            "structured_outputs",
            "give either response_format or structured_outputs, not both",
        )),
        (Some(rf), None) => response_format_grammar(rf),
        (None, Some(so)) => structured_outputs_grammar(so).map(Some),
        (None, None) => Ok(None),
    }
}

fn response_format_grammar(rf: &Value) -> Result<Option<Grammar>, ParamError> {
    let bad = |m: String| ParamError::new("response_format", m);
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
        "structural_tag" => {
            structural_tag_grammar(rf, "response_format", "response_format").map(Some)
        }
        other => Err(bad(format!(
            "response_format type `{other}` is not supported (text, json_object, json_schema, structural_tag)"
        ))),
    }
}

fn structured_outputs_grammar(so: &Value) -> Result<Grammar, ParamError> {
    let bad = |m: String| ParamError::new("structured_outputs", m);
    let obj = so
        .as_object()
        .ok_or_else(|| bad("structured_outputs must be an object".into()))?;
    let set: Vec<(&String, &Value)> = obj
        .iter()
        .filter(|(_, v)| !v.is_null() && **v != Value::Bool(false))
        .collect();
    let [(key, v)] = set[..] else {
        return Err(bad(
            "structured_outputs needs exactly one of json, regex, choice, grammar, json_object, structural_tag"
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
        "structural_tag" => {
            structural_tag_grammar(v, "structured_outputs", "structured_outputs.structural_tag")
        }
        other => Err(bad(format!(
            "structured_outputs.{other} is not supported (json, regex, choice, grammar, json_object, structural_tag)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_apis_map_to_grammars() {
        let rf = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}}});
        assert_eq!(
            requested_grammar(Some(&rf), None),
            Ok(Some(Grammar::JsonSchema(json!({"type": "integer"}))))
        );
        assert_eq!(
            requested_grammar(Some(&json!({"type": "text"})), None),
            Ok(None)
        );
        let so = json!({"choice": ["yes", "no"]});
        assert_eq!(
            requested_grammar(None, Some(&so)),
            Ok(Some(Grammar::Choice(vec!["yes".into(), "no".into()])))
        );
        assert_eq!(
            requested_grammar(None, Some(&json!({"regex": "[0-9]+"}))),
            Ok(Some(Grammar::Regex("[0-9]+".into())))
        );
    }

    #[test]
    fn bad_requests_name_the_field() {
        let field = |rf: Option<Value>, so: Option<Value>| {
            requested_grammar(rf.as_ref(), so.as_ref())
                .unwrap_err()
                .param
        };
        let rf = json!({"type": "json_object"});
        let so = json!({"regex": "a"});
        assert_eq!(field(Some(rf), Some(so)), "structured_outputs");
        assert_eq!(field(Some(json!({"type": "xml"})), None), "response_format");
        assert_eq!(
            field(None, Some(json!({"choice": []}))),
            "structured_outputs"
        );
        assert_eq!(
            field(None, Some(json!({"regex": "a", "grammar": "b"}))),
            "structured_outputs"
        );
    }
}
