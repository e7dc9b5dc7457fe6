//! gpt-oss's calls (its harmony format): after any reasoning (an `analysis` message) and
//! any preamble (a `commentary` message), a call is one more message, on the `commentary`
//! channel, to the recipient `functions.NAME`, its arguments as the body
//! (`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{..}`), and
//! the reply ends at `<|call|>`: one call a reply. The reply splitter (`crate::harmony`)
//! writes each call into the answer as `CALL`, the name, `<|message|>` and the arguments;
//! this reads that form, the answer's other text being its content.

use kiln_core::{Grammar, compact_schema, lark_string};
use serde_json::Value;

use super::Reply;
use crate::harmony::{CALL, CHANNEL, MESSAGE};
use crate::tools::compact_json;

/// A finished reply: its text before the calls, and each call whose arguments are a JSON
/// object; a reply with a call that is not whole is its text as written.
pub(super) fn parse(text: &str) -> Reply {
    let whole = || (Some(text.to_string()), Vec::new());
    let (content, calls) = partial(text);
    // Every call's header ended, and its arguments are an object.
    if calls.is_empty() || calls.len() != text.matches(CALL).count() {
        return whole();
    }
    let object = |args: &str| serde_json::from_str::<Value>(args.trim()).ok();
    let calls: Option<Vec<_>> = (calls.into_iter())
        .map(|(name, args)| {
            let v = object(&args).filter(Value::is_object)?;
            Some((name, compact_json(&v)))
        })
        .collect();
    match calls {
        Some(calls) => ((!content.is_empty()).then_some(content), calls),
        None => whole(),
    }
}

/// A reply's prefix: its content so far (without a tail that may open a call) and its calls
/// so far, each once its name is whole (its header ended), with its arguments as written.
pub(crate) fn partial(text: &str) -> (String, Vec<(String, String)>) {
    let Some(start) = text.find(CALL) else {
        let held = text.len() - crate::partial_suffix(text, CALL);
        return (text[..held].trim().to_string(), Vec::new());
    };
    let calls = (text[start..].split(CALL).skip(1))
        .map_while(|block| block.split_once(MESSAGE))
        .map(|(header, args)| (name(header).to_string(), args.to_string()))
        .collect();
    (text[..start].trim().to_string(), calls)
}

/// The function's name: the header's text after [`CALL`] up to a space or a marker (a raw
/// header may go on with `<|constrain|>json` or ` json`).
fn name(header: &str) -> &str {
    &header[..header.find([' ', '<']).unwrap_or(header.len())]
}

/// The grammar of a reply that calls one of `offered`: reasoning and a preamble as the model
/// likes, then the call (the arguments held to the function's parameters), or, when `auto`,
/// a `final` answer instead.
pub(super) fn grammar(offered: &[(&str, Value)], auto: bool) -> Grammar {
    let mut rules = String::new();
    let mut fns = Vec::new();
    for (i, (name, params)) in offered.iter().enumerate() {
        let schema = compact_schema(params.clone());
        let header = lark_string(&format!("{CALL}{name}"));
        let constrain = lark_string(" <|constrain|>json");
        let message = lark_string(MESSAGE);
        rules +=
            &format!("fn{i}: {header} {constrain}? {message} args{i}\nargs{i}: %json {schema}\n");
        fns.push(format!("fn{i}"));
    }
    let answer = match auto {
        true => format!(
            "start: call | {} TEXT\nTEXT: /(?s:.*)/\n",
            lark_string(&format!("{CHANNEL}final{MESSAGE}"))
        ),
        false => "start: call\n".to_string(),
    };
    let calls = format!("{answer}call: {}\n{rules}", fns.join(" | "));
    crate::harmony::framed(Grammar::Lark(calls), true, None)
}
