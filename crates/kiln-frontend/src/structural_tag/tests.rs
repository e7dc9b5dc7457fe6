//! Structural tags read from requests, and the texts their grammars let through (token by
//! token, with the tiny tokenizer, through llguidance).

use serde_json::{Value, json};

use crate::grammar_testing::accepts;
use crate::requested_grammar;
use kiln_core::Grammar;

fn weather() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false})
}

/// The grammar of `response_format` `rf`.
fn from_rf(rf: Value) -> Grammar {
    requested_grammar(Some(&rf), None)
        .unwrap()
        .expect("a grammar")
}

/// The grammar of a `structural_tag` whose `format` is `format`.
fn from_format(format: Value) -> Grammar {
    from_rf(json!({"type": "structural_tag", "format": format}))
}

/// The request field and message of the error `rf` gets.
fn refusal(rf: Value) -> (String, String) {
    let e = requested_grammar(Some(&rf), None).unwrap_err();
    (e.param, e.message)
}

const CALL: &str = r#"<function=get_weather>{"city": "Oslo"}</function>"#;

#[test]
fn legacy_tags_hold_what_a_trigger_opens_and_leave_other_text_free() {
    let rf = json!({"type": "structural_tag", "triggers": ["<function="],
        "structures": [
            {"begin": "<function=get_weather>", "schema": weather(), "end": "</function>"},
            {"begin": "<function=get_time>", "schema": {"type": "object"}, "end": "</function>"}]});
    let g = from_rf(rf.clone());
    // The same object as vLLM's structured_outputs.structural_tag, as JSON text or not.
    let so = json!({"structural_tag": rf.to_string()});
    assert_eq!(requested_grammar(None, Some(&so)), Ok(Some(g.clone())));
    let so = json!({"structural_tag": rf});
    assert_eq!(requested_grammar(None, Some(&so)), Ok(Some(g.clone())));

    assert!(accepts(&g, ""));
    assert!(accepts(&g, "It is cold in Oslo. <function is a word here"));
    assert!(accepts(&g, CALL));
    let two = format!("Let me look.\n{CALL}\nand <function=get_time>{{}}</function> done");
    assert!(accepts(&g, &two));
    // Once the trigger is written, only a tag may follow, whole and valid.
    assert!(!accepts(&g, "<function=get_news>{}</function>"));
    assert!(!accepts(
        &g,
        r#"<function=get_weather>{"town": "Oslo"}</function>"#
    ));
    assert!(!accepts(&g, r#"<function=get_weather>{"city": "Oslo"}"#));
    assert!(!accepts(
        &g,
        r#"<function=get_weather>{"city": "Oslo"} </function>"#
    ));
}

#[test]
fn format_trees_compose() {
    let tag = |name: &str, content: Value| json!({"type": "tag", "begin": format!("<{name}>"), "content": content, "end": format!("</{name}>")});
    // A sequence: a fixed opening, then an answer tag whose text runs to its end.
    let g = from_format(json!({"type": "sequence", "elements": [
        {"type": "const_string", "value": "Answer: "},
        tag("a", json!({"type": "any_text"}))]}));
    assert!(accepts(&g, "Answer: <a>anything, even < and </b></a>"));
    assert!(!accepts(&g, "Answer: <a>x</a> and more"));
    assert!(!accepts(&g, "<a>x</a>"));

    // Or, regex and JSON.
    let g = from_format(json!({"type": "or", "elements": [
        {"type": "regex", "pattern": "[0-9]+/[0-9]+"},
        {"type": "json_schema", "json_schema": weather()}]}));
    assert!(accepts(&g, "3/4"));
    assert!(accepts(&g, r#"{"city": "Oslo"}"#));
    assert!(!accepts(&g, "3/x"));

    // any_text's excludes.
    let g = from_format(tag("a", json!({"type": "any_text", "excludes": ["\n"]})));
    assert!(accepts(&g, "<a>one line</a>"));
    assert!(!accepts(&g, "<a>two\nlines</a>"));
}

#[test]
fn triggered_tags_follow_their_flags() {
    let tags = json!([{"begin": "<function=get_weather>", "content": {"type": "json_schema", "json_schema": weather()}, "end": "</function>"}]);
    let g = |at_least_one: bool, stop_after_first: bool| {
        from_format(
            json!({"type": "triggered_tags", "triggers": ["<function="], "tags": tags,
            "at_least_one": at_least_one, "stop_after_first": stop_after_first}),
        )
    };
    let (free, one, two) = (
        "no call",
        format!("Look: {CALL}"),
        format!("{CALL}\n{CALL} ok"),
    );
    let after = format!("{CALL} then text");
    for (flags, [f, o, t, a]) in [
        ((false, false), [true, true, true, true]),
        ((true, false), [false, true, true, true]),
        ((false, true), [true, true, false, false]),
        ((true, true), [false, true, false, false]),
    ] {
        let g = g(flags.0, flags.1);
        let got = [
            accepts(&g, free),
            accepts(&g, &one),
            accepts(&g, &two),
            accepts(&g, &after),
        ];
        assert_eq!(got, [f, o, t, a], "flags {flags:?}");
    }

    // Inside a tag, free text stops at the tag's end.
    let g = from_format(json!({"type": "tag", "begin": "<turn>", "end": "</turn>",
        "content": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}));
    assert!(accepts(&g, &format!("<turn>hi {CALL} bye</turn>")));
    assert!(!accepts(&g, "<turn>hi</turn> bye"));
}

#[test]
fn tags_with_separator_allow_nothing_else() {
    let g = |at_least_one: bool, stop_after_first: bool| {
        from_format(json!({"type": "tags_with_separator", "separator": ",",
            "at_least_one": at_least_one, "stop_after_first": stop_after_first,
            "tags": [{"begin": "<n>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</n>"}]}))
    };
    let texts = [
        "",
        "<n>1</n>",
        "<n>1</n>,<n>22</n>",
        "x<n>1</n>",
        "<n>1</n>,",
    ];
    for (flags, want) in [
        ((false, false), [true, true, true, false, false]),
        ((true, false), [false, true, true, false, false]),
        ((false, true), [true, true, false, false, false]),
        ((true, true), [false, true, false, false, false]),
    ] {
        let g = g(flags.0, flags.1);
        let got = texts.map(|t| accepts(&g, t));
        assert_eq!(got, want, "flags {flags:?}");
    }
}

#[test]
fn bad_structural_tags_name_the_part_at_fault() {
    let legacy = |structures: Value, triggers: Value| json!({"type": "structural_tag", "structures": structures, "triggers": triggers});
    let s = json!([{"begin": "<f=a>", "schema": {}, "end": "</f>"}]);
    for (rf, says) in [
        (
            legacy(s.clone(), json!(["<g="])),
            "response_format.structures[0].begin \"<f=a>\" starts with none of the triggers",
        ),
        (
            legacy(s.clone(), json!([])),
            "response_format.triggers must be a non-empty list",
        ),
        (
            legacy(
                json!([{"begin": "<f=a>", "schema": 3, "end": "</f>"}]),
                json!(["<f="]),
            ),
            "response_format.structures[0].schema must be a JSON schema object",
        ),
        (
            legacy(
                json!([{"begin": "<f=a>", "schema": {}, "end": "</f>", "x": 1}]),
                json!(["<f="]),
            ),
            "response_format.structures[0].x is not a field kiln reads here",
        ),
        (
            json!({"type": "structural_tag", "format": {"type": "grammar", "grammar": "root ::= \"a\""}}),
            "response_format.format.type `grammar` is not supported",
        ),
        (
            json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [{"type": "any_text"}, {"type": "const_string", "value": "x"}]}}),
            "response_format.format.elements[0]: any_text runs to the end",
        ),
        (
            json!({"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value": "x"}}}),
            "response_format.format.end must be a non-empty string",
        ),
        (
            json!({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}, "structures": []}),
            "response_format.structures is not a field kiln reads here",
        ),
    ] {
        let (param, message) = refusal(rf);
        assert_eq!(param, "response_format");
        assert!(message.starts_with(says), "{message}");
    }
    let so = json!({"structural_tag": "{not json"});
    let e = requested_grammar(None, Some(&so)).unwrap_err();
    assert_eq!(e.param, "structured_outputs");
    assert!(e.message.starts_with("structured_outputs.structural_tag"));
    assert!(e.message.contains("is not JSON"), "{}", e.message);
}
