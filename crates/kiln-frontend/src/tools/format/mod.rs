//! How a model writes tool calls. A chat template that reads `tools` describes them itself
//! and was trained on its own call syntax: Hermes-style `<tool_call>{..}</tool_call>` blocks
//! (Qwen2.5, Qwen3, Hermes), Llama 3.x's bare `{"name": .., "parameters": {..}}`, or
//! Mistral's `[TOOL_CALLS][{"name": .., "arguments": {..}}, ..]` (with 9-character call ids),
//! or its later `[TOOL_CALLS]name[ARGS]{..}` per call (see `mistral.rs`), or a Python list of
//! calls, `[name(arg=value, ..)]` (Llama 3.2's and Llama 4's pythonic form, see `pythonic.rs`),
//! or GLM-4.5's `<tool_call>name<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>`
//! (see `glm.rs`), or gpt-oss's messages to `functions.NAME` (see `harmony.rs`).
//! Templates without tools get kiln's generic format (see `tools.rs`). Detected from the
//! template text.

pub(crate) mod glm;
pub(crate) mod harmony;

pub use glm::ParamKinds;
mod mistral;
pub(crate) mod pythonic;

use kiln_core::{Grammar, compact_schema, lark_string, regex_escape};
use kiln_model::{ChatTemplate, Tokenizer};
use serde_json::{Value, json};

use super::compact_json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// kiln's: tools in a system message, replies `{"tool_calls": [..]}` or `{"response": ..}`.
    Generic,
    /// `<tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>`, one block per call.
    Hermes,
    /// `{"name": .., "parameters": {..}}`, one call per turn.
    Llama3,
    /// `[TOOL_CALLS]` then a JSON array of `{"name": .., "arguments": {..}}`, opening the
    /// reply. `open`: the opener's id where the tokenizer has it as a special token (its
    /// text is then never in the decoded reply); `None`: written as text.
    Mistral { open: Option<u32> },
    /// `[TOOL_CALLS]name[ARGS]{..}` for each call, after any text: Mistral Small 3.1 and
    /// later, Devstral, Magistral, Ministral 3. `open`, `args`: the two markers' ids where the
    /// tokenizer has them as special tokens. The reply is decoded with its special tokens
    /// (see [`ToolFormat::keeps_special_tokens`]), so the markers are in its text either way.
    MistralArgs {
        open: Option<u32>,
        args: Option<u32>,
    },
    /// `[name(arg=value, ..), ..]`, the whole reply: Python calls with literal arguments.
    Pythonic,
    /// `<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>..</tool_call>` for each
    /// call, after any text: GLM-4.5, 4.6 and 4.7.
    Glm,
    /// gpt-oss's harmony messages: a `commentary` message to `functions.NAME` whose body is
    /// the arguments, after any reasoning and preamble; one call a reply.
    Harmony,
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
pub const MISTRAL_OPEN: &str = "[TOOL_CALLS]";
/// What ends a call's name in the later Mistral form.
pub const MISTRAL_ARGS: &str = "[ARGS]";
/// How templates that want Python calls describe them to the model (Meta's wording of the
/// syntax, `[func_name1(params_name1=params_value1, ...), func_name2(params)]`).
const PYTHONIC_SPEC: &str = "[func_name1(";
/// The length of the call ids Mistral's templates require (ASCII letters and digits).
const MISTRAL_ID_LEN: usize = 9;

const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A parsed reply: its text (`None` when only calls) and its calls as `(name, arguments as
/// JSON text)`.
pub type Reply = (Option<String>, Vec<(String, String)>);

impl ToolFormat {
    pub fn detect(template: Option<&ChatTemplate>, tokenizer: &Tokenizer) -> ToolFormat {
        match template {
            Some(t) if t.reads_tools() && crate::harmony::template_writes(t.source()) => {
                ToolFormat::Harmony
            }
            // GLM's calls open as Hermes' do, with arguments as tags rather than JSON.
            Some(t) if t.reads_tools() && t.source().contains(glm::ARG_KEY) => ToolFormat::Glm,
            Some(t) if t.reads_tools() && t.source().contains(HERMES_OPEN) => ToolFormat::Hermes,
            Some(t) if t.reads_tools() && t.source().contains(MISTRAL_OPEN) => {
                Self::mistral(t.source().contains(MISTRAL_ARGS), tokenizer)
            }
            Some(t) if t.reads_tools() && t.source().contains(PYTHONIC_SPEC) => {
                ToolFormat::Pythonic
            }
            Some(t) if t.reads_tools() && t.source().contains("\"parameters\": ") => {
                ToolFormat::Llama3
            }
            _ => ToolFormat::Generic,
        }
    }

    /// Mistral's later form (`later`: the template writes `[ARGS]`) or its first, with the
    /// markers' ids where `tokenizer` has them as special tokens.
    fn mistral(later: bool, tokenizer: &Tokenizer) -> ToolFormat {
        let special = |marker| {
            tokenizer
                .token_to_id(marker)
                .filter(|&id| tokenizer.is_special(id))
        };
        let open = special(MISTRAL_OPEN);
        match later {
            true => ToolFormat::MistralArgs {
                open,
                args: special(MISTRAL_ARGS),
            },
            false => ToolFormat::Mistral { open },
        }
    }

    /// The format vLLM's `--tool-call-parser NAME` names, for a model with `template` and
    /// `tokenizer` (`auto`: read from the template; `kiln`: kiln's generic JSON). A model's own
    /// format needs a template that renders the tools; an error says so, or lists the names
    /// kiln reads.
    pub fn named(
        name: &str,
        template: Option<&ChatTemplate>,
        tokenizer: &Tokenizer,
    ) -> Result<ToolFormat, String> {
        let native = |f: ToolFormat| match template {
            Some(t) if t.reads_tools() => Ok(f),
            _ => Err(format!(
                "{name}: the chat template does not render `tools`, so the model would not \
                 see them; give one that does (--chat-template)"
            )),
        };
        let later = template.is_some_and(|t| t.source().contains(MISTRAL_ARGS));
        match name {
            "auto" => Ok(Self::detect(template, tokenizer)),
            "kiln" => Ok(ToolFormat::Generic),
            "hermes" => native(ToolFormat::Hermes),
            "llama3_json" => native(ToolFormat::Llama3),
            "pythonic" | "llama4_pythonic" => native(ToolFormat::Pythonic),
            "mistral" => native(Self::mistral(later, tokenizer)),
            "glm45" | "glm47" => native(ToolFormat::Glm),
            "openai" => native(ToolFormat::Harmony),
            other => Err(format!(
                "{other}: not a tool-call parser kiln reads (auto, hermes, llama3_json, \
                 mistral, pythonic or llama4_pythonic, glm45 or glm47, openai, kiln)"
            )),
        }
    }

    /// A fresh id for a call the model made: 9 letters and digits for Mistral (whose
    /// templates refuse others when the call comes back), `call-` and 16 hex digits otherwise.
    pub fn new_call_id(self) -> String {
        match self {
            ToolFormat::Mistral { .. } | ToolFormat::MistralArgs { .. } => {
                use rand::Rng;
                let mut rng = rand::rng();
                (0..MISTRAL_ID_LEN)
                    .map(|_| ALNUM[rng.random_range(0..ALNUM.len())] as char)
                    .collect()
            }
            _ => format!("call-{:016x}", rand::random::<u64>()),
        }
    }

    /// A past call's id as the template is given it. Mistral's templates raise on any id
    /// that is not 9 characters long, so another id (one a client or another server made) is
    /// mapped to 9 letters and digits derived from it: the same id always maps alike, so a
    /// call and the tool message answering it still agree. Other formats take ids as they are.
    pub fn template_call_id(self, id: &str) -> String {
        let fits = id.len() == MISTRAL_ID_LEN && id.bytes().all(|b| b.is_ascii_alphanumeric());
        match self {
            ToolFormat::Mistral { .. } | ToolFormat::MistralArgs { .. } if !fits => {
                // FNV-1a over the id's bytes, written in base 62.
                let mut h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
                (0..MISTRAL_ID_LEN)
                    .map(|_| {
                        let c = ALNUM[(h % 62) as usize] as char;
                        h /= 62;
                        c
                    })
                    .collect()
            }
            _ => id.to_string(),
        }
    }

    /// The syntax in words, for `kiln info` and the server's log.
    pub fn describe(self) -> &'static str {
        match self {
            ToolFormat::Generic => "kiln's generic JSON (the template has no tools)",
            ToolFormat::Hermes => "Hermes <tool_call> blocks",
            ToolFormat::Llama3 => "Llama 3 JSON calls",
            ToolFormat::Mistral { .. } => "Mistral [TOOL_CALLS] arrays",
            ToolFormat::MistralArgs { .. } => "Mistral [TOOL_CALLS]name[ARGS] calls",
            ToolFormat::Pythonic => "pythonic [name(arg=value)] calls",
            ToolFormat::Glm => "GLM <tool_call> blocks of <arg_key>/<arg_value> pairs",
            ToolFormat::Harmony => "gpt-oss harmony messages to functions.NAME",
        }
    }

    /// Whether the template is given the tools and the assistant's past calls as data.
    pub fn is_native(self) -> bool {
        self != ToolFormat::Generic
    }

    /// Whether a reply that may call tools is decoded with its special tokens' text (vLLM's
    /// `skip_special_tokens: false`): the later Mistral form's markers are special tokens,
    /// and without them a call's name and arguments would run together.
    pub fn keeps_special_tokens(self) -> bool {
        matches!(self, ToolFormat::MistralArgs { .. })
    }

    /// The JSON object of one call to one of `offered` (name, then arguments), in the key
    /// names this format uses.
    fn call_schema(self, offered: &[(&str, Value)]) -> Value {
        let args_key = match self {
            ToolFormat::Llama3 => "parameters",
            _ => "arguments",
        };
        let alts: Vec<Value> = offered
            .iter()
            .map(|(name, params)| {
                json!({
                    "type": "object",
                    "properties": {"name": {"const": name}, args_key: params},
                    "required": ["name", args_key],
                    "additionalProperties": false,
                })
            })
            .collect();
        match alts.len() {
            1 => alts.into_iter().next().expect("one alternative"),
            _ => json!({"anyOf": alts}),
        }
    }

    /// The grammar of a reply that calls `offered`: only calls (`tool_choice` `required` or a
    /// named function), or, when `auto`, free text where a call, once opened, must be
    /// well-formed. `parallel` allows several calls where the format has room for them.
    pub fn calls_grammar(self, offered: &[(&str, Value)], auto: bool, parallel: bool) -> Grammar {
        let schema = compact_schema(self.call_schema(offered));
        match self {
            ToolFormat::Hermes => {
                let open = lark_string(&format!("{HERMES_OPEN}\n"));
                let close = lark_string(&format!("\n{HERMES_CLOSE}"));
                let more = if parallel { r#" ("\n" call)*"# } else { "" };
                let start = if auto {
                    // Text without the opener, or text up to the first opener (a lazy lexeme,
                    // which ends where the opener does), then the calls.
                    format!(
                        "start: TEXT | lead \"\\n\" body {close}{more}\n\
                         TEXT: /(?s:.*)/ & ~/(?s:.*){o}(?s:.*)/\n\
                         lead[lazy]: /(?s:.*){o}/\n",
                        o = regex_escape(HERMES_OPEN),
                    )
                } else {
                    format!("start: call{more}\n")
                };
                Grammar::Lark(format!(
                    "{start}call: {open} body {close}\nbody: %json {schema}\n"
                ))
            }
            // A reply that opens with `{` is the call; any other text is an answer.
            ToolFormat::Llama3 if auto => Grammar::Lark(format!(
                "start: TEXT | call\nTEXT: /([^{{](?s:.*))?/\ncall: %json {schema}\n"
            )),
            ToolFormat::Mistral { open } => {
                mistral::array_grammar(open, self.call_schema(offered), auto, parallel)
            }
            ToolFormat::MistralArgs { open, args } => {
                mistral::named_grammar(open, args, offered, auto, parallel)
            }
            ToolFormat::Pythonic => pythonic::grammar(offered, auto, parallel),
            ToolFormat::Glm => glm::grammar(offered, auto, parallel),
            ToolFormat::Harmony => harmony::grammar(offered, auto),
            _ => Grammar::JsonSchema(self.call_schema(offered)),
        }
    }

    /// Splits a finished reply into text and calls. Text that is not a well-formed call is
    /// returned whole as content, as a model that chose not to call a tool wrote it.
    pub fn parse(self, text: &str) -> Reply {
        self.parse_typed(text, &ParamKinds::default())
    }

    /// The same, with the offered tools' string parameters known (GLM's syntax writes
    /// strings bare, so a value's type is the schema's where it names one).
    pub fn parse_typed(self, text: &str, kinds: &ParamKinds) -> Reply {
        let whole = || (Some(text.to_string()), Vec::new());
        let call = |v: &Value, args_keys: &[&str]| -> Option<(String, String)> {
            let name = v.get("name")?.as_str()?.to_string();
            let args = args_keys.iter().find_map(|k| v.get(*k))?;
            args.is_object().then(|| (name, compact_json(args)))
        };
        match self {
            ToolFormat::Hermes => {
                let Some(start) = text.find(HERMES_OPEN) else {
                    return whole();
                };
                let mut calls = Vec::new();
                for block in text[start..].split(HERMES_OPEN).skip(1) {
                    let Some((body, rest)) = block.split_once(HERMES_CLOSE) else {
                        return whole();
                    };
                    let parsed = serde_json::from_str::<Value>(body.trim()).ok();
                    match parsed.as_ref().and_then(|v| call(v, &["arguments"])) {
                        Some(c) if rest.trim().is_empty() => calls.push(c),
                        _ => return whole(),
                    }
                }
                let before = text[..start].trim();
                ((!before.is_empty()).then(|| before.to_string()), calls)
            }
            ToolFormat::Llama3 => {
                let body = text.trim().trim_start_matches("<|python_tag|>");
                match serde_json::from_str::<Value>(body)
                    .ok()
                    .and_then(|v| call(&v, &["parameters", "arguments"]))
                {
                    Some(c) => (None, vec![c]),
                    None => whole(),
                }
            }
            ToolFormat::Mistral { .. } => mistral::parse_array(text, |v| call(v, &["arguments"])),
            ToolFormat::MistralArgs { .. } => mistral::parse_named(text),
            ToolFormat::Pythonic => pythonic::parse(text),
            ToolFormat::Glm => glm::parse(text, kinds),
            ToolFormat::Harmony => harmony::parse(text),
            ToolFormat::Generic => whole(),
        }
    }
}

#[cfg(test)]
mod tests;
