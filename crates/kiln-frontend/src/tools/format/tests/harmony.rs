//! gpt-oss's calls: detection, the answer's call form parsed whole and streamed (through the
//! reply splitter, from each way of writing the header), and grammars.

use serde_json::json;

use super::*;
use crate::grammar_testing::accepts;
use crate::harmony::CALL;
use crate::tools::{Piece, ToolPlan, ToolStream};
use crate::{ReasoningFormat, ReplyPart, ReplyReader};

#[test]
fn calls_in_the_answer_parse_to_name_and_arguments() {
    let f = ToolFormat::Harmony;
    let call = format!("{CALL}get_weather<|message|>{{\"city\":\"Oslo\",\"days\":3}}");
    let want = (
        "get_weather".to_string(),
        r#"{"city": "Oslo", "days": 3}"#.to_string(),
    );
    assert_eq!(f.parse(&call), (None, vec![want.clone()]));
    // A preamble before the call is its content.
    let with_text = format!("Checking the weather. {call}");
    assert_eq!(
        f.parse(&with_text),
        (Some("Checking the weather.".into()), vec![want])
    );
    // Not whole, or no call at all: the text as written.
    for text in [
        "It is cold.".to_string(),
        format!("{CALL}get_weather<|message|>{{\"city\":"),
        format!("{CALL}get_weather<|message|>[1]"),
        format!("{CALL}get_weather"),
    ] {
        assert_eq!(f.parse(&text), (Some(text.clone()), vec![]), "{text}");
    }
}

fn plan() -> ToolPlan {
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    ToolPlan::parse(Some(&tools), None, None, ToolFormat::Harmony)
        .unwrap()
        .unwrap()
}

/// A raw reply pushed token by token through the reasoning splitter and the call reader, as
/// the server, the browser and the desktop app read replies: its parts, joined by kind.
fn read(pieces: &[&str]) -> (String, String, Vec<String>, String) {
    let plan = plan();
    let harmony = ReasoningFormat::Harmony;
    let mut reader = ReplyReader::new(harmony.stream(false), Some(&plan));
    let (mut reasoning, mut text, mut args) = (String::new(), String::new(), String::new());
    let mut names = Vec::new();
    let last = pieces.len() - 1;
    for (i, p) in pieces.iter().enumerate() {
        let finish = (i == last).then_some("stop");
        for part in reader.push(p, 1, finish) {
            match part {
                ReplyPart::Reasoning(r) => reasoning += &r,
                ReplyPart::Text(t) => text += &t,
                ReplyPart::Call { name, .. } => names.push(name),
                ReplyPart::Args(a) => args += &a,
            }
        }
    }
    assert_eq!(reader.called(), !names.is_empty());
    (reasoning, text, names, args)
}

#[test]
fn calls_stream_from_either_header_form() {
    let think = [
        "<|channel|>",
        "analysis",
        "<|message|>",
        "Need",
        " weather",
        "<|end|>",
    ];
    let args = ["{\"", "city", "\":\"", "Oslo", "\"}", ""];
    // The recipient after the channel, with a constraint.
    let after = [
        "<|start|>",
        "assistant",
        "<|channel|>",
        "commentary",
        " to",
        "=functions",
        ".get",
        "_weather",
        " ",
        "<|constrain|>",
        "json",
        "<|message|>",
    ];
    // The recipient in the role's place, as the template writes past calls.
    let before = [
        "<|start|>",
        "assistant",
        " to",
        "=functions",
        ".get",
        "_weather",
        "<|channel|>",
        "commentary",
        " json",
        "<|message|>",
    ];
    for header in [&after[..], &before[..]] {
        let pieces: Vec<&str> = think.iter().chain(header).chain(&args).copied().collect();
        let (reasoning, text, names, streamed) = read(&pieces);
        assert_eq!(reasoning, "Need weather");
        assert_eq!(text, "");
        assert_eq!(names, ["get_weather"]);
        assert_eq!(streamed, r#"{"city":"Oslo"}"#);
    }
    // A final answer: no call.
    let answer = [
        "<|start|>",
        "assistant",
        "<|channel|>",
        "final",
        "<|message|>",
        "Cold",
        ".",
    ];
    let pieces: Vec<&str> = think.iter().chain(&answer).copied().collect();
    assert_eq!(
        read(&pieces),
        ("Need weather".into(), "Cold.".into(), vec![], String::new())
    );
    // The call form's text is never let out as content while it is being written.
    let mut s = ToolStream::new(ToolFormat::Harmony);
    let mut out = Vec::new();
    let call = format!("Wait. {CALL}f<|message|>{{}}");
    for (i, c) in call.char_indices() {
        out.extend(s.pieces(&call[i..i + c.len_utf8()], || "id".into()));
    }
    let content: String = (out.iter())
        .filter_map(|p| match p {
            Piece::Content(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(content, "Wait.");
    let call = out
        .iter()
        .position(|p| matches!(p, Piece::Call { .. }))
        .unwrap();
    assert!(
        !out[call..].iter().any(|p| matches!(p, Piece::Content(_))),
        "{out:?}"
    );
}

#[test]
fn grammars_allow_reasoning_and_a_preamble_then_hold_the_call() {
    let offered = [(
        "get_weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
    )];
    let think = "<|channel|>analysis<|message|>User wants <|x weather.<|end|><|start|>assistant";
    let preamble = "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant";
    let call = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}";
    let bare = "<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Oslo\"}";
    let last = "<|channel|>final<|message|>It is cold.";
    let required = ToolFormat::Harmony.calls_grammar(&offered, false, true);
    let auto = ToolFormat::Harmony.calls_grammar(&offered, true, true);
    for g in [&required, &auto] {
        assert!(accepts(g, call));
        assert!(accepts(g, bare));
        assert!(accepts(g, &format!("{think}{call}")));
        assert!(accepts(g, &format!("{think}{preamble}{call}")));
        // Another function, arguments outside the schema, a second call.
        assert!(!accepts(
            g,
            "<|channel|>commentary to=functions.put<|message|>{}"
        ));
        assert!(!accepts(
            g,
            "<|channel|>commentary to=functions.get_weather<|message|>{}"
        ));
        assert!(!accepts(g, &format!("{call}{call}")));
    }
    // Only `auto` may answer instead.
    assert!(accepts(&auto, last) && accepts(&auto, &format!("{think}{last}")));
    assert!(!accepts(&required, last) && !accepts(&required, &format!("{think}{last}")));
}

#[test]
fn the_format_is_read_from_a_harmony_template() {
    let tok = crate::grammar_testing::tiny_tokenizer_with(&[]);
    let src = "{% if tools %}{{ tools | tojson }}{% endif %}<|start|>assistant<|channel|>final<|message|>";
    let t = ChatTemplate::new(src, "", "", "test").unwrap();
    assert_eq!(ToolFormat::detect(Some(&t), &tok), ToolFormat::Harmony);
    assert_eq!(
        ToolFormat::named("openai", Some(&t), &tok),
        Ok(ToolFormat::Harmony)
    );
    assert!(ToolFormat::named("openai", None, &tok).is_err());
}
