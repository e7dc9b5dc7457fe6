//! Structural tags (vLLM's `structural_tag`): the output shape agents ask for when a model may
//! write free text and call tools in its own syntax: text, then `<function=get_weather>` and
//! arguments valid under that tool's schema, then `</function>`, then text again. Read from
//! `response_format` (`{"type": "structural_tag", ...}`) or `structured_outputs.structural_tag`
//! (the same object, or its JSON text), in either form vLLM takes:
//!
//! - the legacy one, `structures` (`begin`, JSON `schema`, `end`) and `triggers`: free text in
//!   which each trigger opens one of the structures whose `begin` starts with it;
//! - the `format` tree: `const_string`, `json_schema`, `regex`, `any_text`, `sequence`, `or`,
//!   `tag`, `triggered_tags` and `tags_with_separator` (the others are refused by name).
//!
//! The tree becomes a Lark grammar (`lark.rs`). Unknown fields are refused, and errors name
//! the part at fault by its path (`response_format.format.tags[1].begin`).

mod lark;
#[cfg(test)]
mod tests;

use kiln_core::Grammar;
use serde_json::{Map, Value};

use crate::ParamError;

/// One part of a structural tag's output.
#[derive(Clone, Debug, PartialEq)]
enum Structure {
    /// Exactly this text.
    Const(String),
    /// A JSON value valid under this schema.
    JsonSchema(Value),
    /// Text that this regular expression matches whole.
    Regex(String),
    /// Any text without these strings, up to the end of the enclosing tag or of the output.
    AnyText { excludes: Vec<String> },
    /// Each part in turn.
    Sequence(Vec<Structure>),
    /// One of the parts.
    Or(Vec<Structure>),
    /// A tag: its begin, its content, its end.
    Tag(Tag),
    /// Free text in which each trigger opens one of the tags whose begin starts with it; after
    /// a tag's end, free text again. `at_least_one`: some tag must be written;
    /// `stop_after_first`: the output (or the enclosing tag) ends with the first tag.
    Triggered {
        triggers: Vec<String>,
        tags: Vec<Tag>,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// Tags only, with `separator` between them.
    Separated {
        tags: Vec<Tag>,
        separator: String,
        at_least_one: bool,
        stop_after_first: bool,
    },
}

/// `begin`, then `content`, then `end`.
#[derive(Clone, Debug, PartialEq)]
struct Tag {
    begin: String,
    content: Box<Structure>,
    end: String,
}

const FORMATS: &str = "const_string, json_schema, regex, any_text, sequence, or, tag, triggered_tags, tags_with_separator";

/// The grammar of the structural tag `v` (an object, or its JSON text) at `path` of the
/// request field `field`.
pub(crate) fn structural_tag_grammar(
    v: &Value,
    field: &str,
    path: &str,
) -> Result<Grammar, ParamError> {
    let reader = Reader { field };
    let parsed;
    let v = match v {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|e| reader.bad(format!("{path} is not JSON: {e}")))?;
            &parsed
        }
        v => v,
    };
    let top = reader.object(v, path)?;
    if let Some(t) = top.get("type").filter(|t| !t.is_null())
        && t != "structural_tag"
    {
        return Err(reader.bad(format!("{path}.type must be \"structural_tag\", not {t}")));
    }
    let structure = if top.contains_key("format") {
        reader.only(top, path, &["type", "format"])?;
        reader.structure(&top["format"], &format!("{path}.format"), true)?
    } else {
        reader.only(top, path, &["type", "structures", "triggers"])?;
        reader.legacy(top, path)?
    };
    Ok(Grammar::Lark(lark::grammar(&structure)))
}

/// Reads the request's JSON, naming the request field in every error.
struct Reader<'a> {
    field: &'a str,
}

impl Reader<'_> {
    fn bad(&self, message: String) -> ParamError {
        ParamError::new(self.field, message)
    }

    fn object<'v>(&self, v: &'v Value, path: &str) -> Result<&'v Map<String, Value>, ParamError> {
        v.as_object()
            .ok_or_else(|| self.bad(format!("{path} must be an object")))
    }

    /// Refuses the keys of `o` outside `known`.
    fn only(&self, o: &Map<String, Value>, path: &str, known: &[&str]) -> Result<(), ParamError> {
        match o.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(self.bad(format!(
                "{path}.{k} is not a field kiln reads here ({})",
                known.join(", ")
            ))),
            None => Ok(()),
        }
    }

    fn string(&self, o: &Map<String, Value>, path: &str, key: &str) -> Result<String, ParamError> {
        o.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| self.bad(format!("{path}.{key} must be a string")))
    }

    fn flag(&self, o: &Map<String, Value>, path: &str, key: &str) -> Result<bool, ParamError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.bad(format!("{path}.{key} must be true or false"))),
        }
    }

    /// The non-empty list `o[key]`, each item read by `item` with its path.
    fn list<T>(
        &self,
        o: &Map<String, Value>,
        path: &str,
        key: &str,
        mut item: impl FnMut(&Value, &str) -> Result<T, ParamError>,
    ) -> Result<Vec<T>, ParamError> {
        let items = o
            .get(key)
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| self.bad(format!("{path}.{key} must be a non-empty list")))?;
        items
            .iter()
            .enumerate()
            .map(|(i, v)| item(v, &format!("{path}.{key}[{i}]")))
            .collect()
    }

    fn text(&self, v: &Value, path: &str) -> Result<String, ParamError> {
        v.as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| self.bad(format!("{path} must be a non-empty string")))
    }

    /// The non-empty string `o[key]`.
    fn field_text(
        &self,
        o: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Result<String, ParamError> {
        self.text(o.get(key).unwrap_or(&Value::Null), &format!("{path}.{key}"))
    }

    fn schema(&self, v: Option<&Value>, path: &str) -> Result<Value, ParamError> {
        match v {
            Some(s @ (Value::Object(_) | Value::Bool(_))) => Ok(s.clone()),
            _ => Err(self.bad(format!("{path} must be a JSON schema object"))),
        }
    }

    /// The legacy form: free text and the structures its triggers open.
    fn legacy(&self, top: &Map<String, Value>, path: &str) -> Result<Structure, ParamError> {
        let triggers = self.list(top, path, "triggers", |v, p| self.text(v, p))?;
        let tags = self.list(top, path, "structures", |v, p| {
            let o = self.object(v, p)?;
            self.only(o, p, &["begin", "schema", "end"])?;
            Ok(Tag {
                begin: self.field_text(o, p, "begin")?,
                content: Box::new(Structure::JsonSchema(
                    self.schema(o.get("schema"), &format!("{p}.schema"))?,
                )),
                end: self.field_text(o, p, "end")?,
            })
        })?;
        self.check_triggers(&triggers, &tags, path, "structures")?;
        Ok(Structure::Triggered {
            triggers,
            tags,
            at_least_one: false,
            stop_after_first: false,
        })
    }

    /// Every tag's begin starts with one of the triggers.
    fn check_triggers(
        &self,
        triggers: &[String],
        tags: &[Tag],
        path: &str,
        key: &str,
    ) -> Result<(), ParamError> {
        match tags
            .iter()
            .position(|t| trigger_of(&t.begin, triggers).is_none())
        {
            Some(i) => Err(self.bad(format!(
                "{path}.{key}[{i}].begin {:?} starts with none of the triggers {triggers:?}",
                tags[i].begin
            ))),
            None => Ok(()),
        }
    }

    /// One part of the `format` tree at `path`; `last`: nothing follows it but the end of its
    /// tag or of the output (where parts of unbounded text may stand).
    fn structure(&self, v: &Value, path: &str, last: bool) -> Result<Structure, ParamError> {
        let o = self.object(v, path)?;
        let kind = o
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| self.bad(format!("{path}.type must be one of {FORMATS}")))?;
        let fields: &[&str] = match kind {
            "const_string" => &["type", "value"],
            "json_schema" => &["type", "json_schema"],
            "regex" => &["type", "pattern"],
            "any_text" => &["type", "excludes"],
            "sequence" | "or" => &["type", "elements"],
            "tag" => &["type", "begin", "content", "end"],
            "triggered_tags" => &[
                "type",
                "triggers",
                "tags",
                "at_least_one",
                "stop_after_first",
            ],
            "tags_with_separator" => &[
                "type",
                "tags",
                "separator",
                "at_least_one",
                "stop_after_first",
            ],
            other => {
                return Err(self.bad(format!(
                    "{path}.type `{other}` is not supported (kiln reads {FORMATS})"
                )));
            }
        };
        self.only(o, path, fields)?;
        let unbounded = |what: &str| {
            self.bad(format!(
                "{path}: {what} runs to the end of its tag or of the output, so nothing may follow it in a sequence"
            ))
        };
        let tags = |key| self.list(o, path, key, |v, p| self.tag(v, p));
        Ok(match kind {
            "const_string" => Structure::Const(self.field_text(o, path, "value")?),
            "json_schema" => Structure::JsonSchema(
                self.schema(o.get("json_schema"), &format!("{path}.json_schema"))?,
            ),
            "regex" => Structure::Regex(self.string(o, path, "pattern")?),
            "any_text" if !last => return Err(unbounded("any_text")),
            "any_text" => Structure::AnyText {
                excludes: match o.get("excludes") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(_) => self.list(o, path, "excludes", |v, p| self.text(v, p))?,
                },
            },
            "sequence" => {
                let n = o
                    .get("elements")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let mut i = 0;
                Structure::Sequence(self.list(o, path, "elements", |v, p| {
                    i += 1;
                    self.structure(v, p, last && i == n)
                })?)
            }
            "or" => {
                Structure::Or(self.list(o, path, "elements", |v, p| self.structure(v, p, last))?)
            }
            "tag" => Structure::Tag(self.tag(v, path)?),
            "triggered_tags" if !last => return Err(unbounded("triggered_tags")),
            "triggered_tags" => {
                let triggers = self.list(o, path, "triggers", |v, p| self.text(v, p))?;
                let tags = tags("tags")?;
                self.check_triggers(&triggers, &tags, path, "tags")?;
                Structure::Triggered {
                    triggers,
                    tags,
                    at_least_one: self.flag(o, path, "at_least_one")?,
                    stop_after_first: self.flag(o, path, "stop_after_first")?,
                }
            }
            _ => Structure::Separated {
                tags: tags("tags")?,
                separator: self.string(o, path, "separator")?,
                at_least_one: self.flag(o, path, "at_least_one")?,
                stop_after_first: self.flag(o, path, "stop_after_first")?,
            },
        })
    }

    /// A `tag` part (its `type` may be left out where only a tag can stand).
    fn tag(&self, v: &Value, path: &str) -> Result<Tag, ParamError> {
        let o = self.object(v, path)?;
        self.only(o, path, &["type", "begin", "content", "end"])?;
        if let Some(t) = o.get("type").filter(|t| *t != "tag") {
            return Err(self.bad(format!("{path}.type must be \"tag\", not {t}")));
        }
        let content = o
            .get("content")
            .ok_or_else(|| self.bad(format!("{path}.content is missing")))?;
        Ok(Tag {
            begin: self.field_text(o, path, "begin")?,
            content: Box::new(self.structure(content, &format!("{path}.content"), true)?),
            end: self.field_text(o, path, "end")?,
        })
    }
}

/// The first of `triggers` that `begin` starts with.
fn trigger_of<'a>(begin: &str, triggers: &'a [String]) -> Option<&'a str> {
    triggers
        .iter()
        .find(|t| begin.starts_with(t.as_str()))
        .map(String::as_str)
}
