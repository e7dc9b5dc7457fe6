//! GLM-4.5's calls: parsing (4.5's and 4.7's spacing), value types, detection, the template's
//! own rendering read back, streaming and grammars.

use super::*;
use crate::tools::format::glm;

/// GLM-4.5's way of writing a past call, as its template does (strings as they are, other
/// values as JSON, newlines between the tags).
const GLM45_CALLS: &str = "{% if tools %}{% endif %}{% for m in messages %}{% for tc in m.tool_calls %}\
{% set tc = tc.function %}{{ '\\n<tool_call>' + tc.name }}\n{% for k, v in tc.arguments.items() %}\
<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v | tojson if v is not string else v }}</arg_value>\n\
{% endfor %}</tool_call>{% endfor %}{% endfor %}";

#[test]
fn glm_replies_split_into_text_and_typed_calls() {
    let f = ToolFormat::Glm;
    let text = "Let me look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"units\": \"metric\", \"hourly\": true}</arg_value>\n</tool_call>\n<tool_call>get_time\n</tool_call>";
    let (content, calls) = f.parse(text);
    assert_eq!(content.as_deref(), Some("Let me look."));
    assert_eq!(
        calls,
        vec![
            (
                "get_weather".into(),
                r#"{"city": "Oslo", "days": 3, "opts": {"units": "metric", "hourly": true}}"#
                    .into()
            ),
            ("get_time".into(), "{}".into()),
        ]
    );
    // GLM-4.7 writes no newlines; text values keep theirs, and a quoted value is text.
    let compact = "<tool_call>note<arg_key>text</arg_key><arg_value>two\nlines</arg_value><arg_key>q</arg_key><arg_value>\"x\"</arg_value></tool_call>";
    assert_eq!(
        f.parse(compact),
        (
            None,
            vec![(
                "note".into(),
                r#"{"text": "two\nlines", "q": "\"x\""}"#.into()
            )]
        )
    );
    // Anything that is not calls to the end is text.
    for text in [
        "Oslo is cold.",
        "<tool_call>get<arg_key>city</arg_key><arg_value>Oslo",
        "<tool_call>get<arg_key>city</arg_key>Oslo</tool_call>",
        "<tool_call>\n</tool_call>",
        "<tool_call>get</tool_call> and more",
    ] {
        assert_eq!(f.parse(text), (Some(text.into()), vec![]), "{text}");
    }
}

#[test]
fn glm_templates_are_not_read_as_hermes() {
    let tok = tiny_tokenizer(false);
    let t = ChatTemplate::new(GLM45_CALLS, "", "", "test").unwrap();
    assert_eq!(ToolFormat::detect(Some(&t), &tok), ToolFormat::Glm);
    assert_eq!(
        ToolFormat::named("glm45", Some(&t), &tok),
        Ok(ToolFormat::Glm)
    );
    assert_eq!(
        ToolFormat::named("glm47", Some(&t), &tok),
        Ok(ToolFormat::Glm)
    );
    let hermes = ChatTemplate::new("{% if tools %}<tool_call>{% endif %}", "", "", "t").unwrap();
    assert!(ToolFormat::named("glm45", Some(&hermes), &tok).is_ok());
    assert!(ToolFormat::named("glm45", None, &tok).is_err());
}

/// What GLM's template writes for a call comes back as the same call.
#[test]
fn a_rendered_call_reads_back_as_itself() {
    let t = ChatTemplate::new(GLM45_CALLS, "", "", "test").unwrap();
    let args = json!({"city": "Oslo", "days": 3, "tags": ["a", "b"], "exact": false, "note": null});
    let messages: Vec<kiln_model::ChatMessage> = serde_json::from_value(json!([
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": args}},
            {"id": "2", "type": "function", "function": {"name": "get_time", "arguments": {}}},
        ]}
    ]))
    .unwrap();
    let text = t.render(&messages, false).unwrap();
    let (content, calls) = ToolFormat::Glm.parse(&text);
    assert_eq!(content, None, "{text}");
    let read: Vec<(String, Value)> = (calls.iter())
        .map(|(n, a)| (n.clone(), serde_json::from_str(a).unwrap()))
        .collect();
    let want = vec![
        ("get_weather".to_string(), args),
        ("get_time".into(), json!({})),
    ];
    assert_eq!(read, want, "{text}");
}

#[test]
fn glm_calls_stream_whole_once_closed() {
    let p = |t: &str| glm::partial(t, &ParamKinds::default());
    assert_eq!(p("Let me <tool_"), ("Let me".into(), vec![]));
    assert_eq!(p("<tool_call>get_wea"), (String::new(), vec![]));
    assert_eq!(
        p("Hi <tool_call>get_weather\n<arg_key>ci"),
        ("Hi".into(), vec![("get_weather".into(), String::new())])
    );
    assert_eq!(
        p(
            "<tool_call>get<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call><tool_call>put</"
        ),
        (
            String::new(),
            vec![
                ("get".into(), r#"{"city": "Oslo"}"#.into()),
                ("put".into(), String::new())
            ]
        )
    );
}

#[test]
fn glm_grammars_hold_names_and_value_types() {
    let offered = [
        (
            "get",
            json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}),
        ),
        ("any", json!({"type": "object"})),
    ];
    let required = ToolFormat::Glm.calls_grammar(&offered, false, true);
    let call = "<tool_call>get\n<arg_key>city</arg_key>\n<arg_value>Oslo, Norway</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
    assert!(accepts(&required, call));
    assert!(accepts(&required, &format!("{call}\n{call}")));
    assert!(accepts(
        &required,
        "<tool_call>any<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>"
    ));
    assert!(!accepts(&required, "Oslo is cold."));
    assert!(!accepts(&required, "<tool_call>put\n</tool_call>"));
    // An integer parameter takes JSON integers only; a key the tool lacks is refused.
    let days = |v: &str| {
        format!("<tool_call>get<arg_key>days</arg_key><arg_value>{v}</arg_value></tool_call>")
    };
    assert!(!accepts(&required, &days("three")));
    assert!(!accepts(
        &required,
        "<tool_call>get<arg_key>town</arg_key><arg_value>Oslo</arg_value></tool_call>"
    ));
    let single = ToolFormat::Glm.calls_grammar(&offered, false, false);
    assert!(!accepts(&single, &format!("{call}\n{call}")));
    let auto = ToolFormat::Glm.calls_grammar(&offered, true, true);
    assert!(accepts(&auto, "Oslo is cold."));
    assert!(accepts(&auto, &format!("Let me look.\n{call}")));
    assert!(!accepts(&auto, "Let me look.\n<tool_call>put</tool_call>"));
}

/// With the offered tools' schemas, a string parameter's text stays text however it reads,
/// and a typed one's JSON is read as such; parameters of no known type are read as they look.
#[test]
fn schemas_type_the_values_read_back() {
    let offered = [(
        "run",
        json!({"type": "object", "properties": {"code": {"type": "string"}, "n": {"type": "integer"}, "any": {}}}),
    )];
    let kinds = ParamKinds::new(&offered);
    let text = "<tool_call>run<arg_key>code</arg_key><arg_value>42</arg_value><arg_key>n</arg_key><arg_value>7</arg_value><arg_key>any</arg_key><arg_value>true</arg_value></tool_call>";
    let want = vec![(
        "run".into(),
        r#"{"code": "42", "n": 7, "any": true}"#.into(),
    )];
    assert_eq!(
        ToolFormat::Glm.parse_typed(text, &kinds),
        (None, want.clone())
    );
    // Untyped, the string's text reads as a number.
    let (_, calls) = ToolFormat::Glm.parse(text);
    assert_eq!(calls[0].1, r#"{"code": 42, "n": 7, "any": true}"#);
    // The stream reads alike.
    let streamed = crate::tools::partial_typed(ToolFormat::Glm, text, &kinds);
    assert_eq!(streamed.calls, want);
}

/// Required arguments come first and must be there; a string's `enum` and length bounds hold.
#[test]
fn glm_grammars_hold_required_arguments_and_string_bounds() {
    let offered = [(
        "get",
        json!({"type": "object", "properties": {
            "days": {"type": "integer"},
            "city": {"type": "string", "maxLength": 8},
            "units": {"type": "string", "enum": ["metric", "imperial"]}},
            "required": ["city"]}),
    )];
    let g = ToolFormat::Glm.calls_grammar(&offered, false, false);
    let call = |args: &[(&str, &str)]| {
        let args: String = (args.iter())
            .map(|(k, v)| format!("<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"))
            .collect();
        format!("<tool_call>get{args}</tool_call>")
    };
    assert!(accepts(&g, &call(&[("city", "Oslo")])));
    assert!(accepts(
        &g,
        &call(&[("city", "Oslo"), ("days", "3"), ("units", "metric")])
    ));
    assert!(!accepts(&g, &call(&[])), "city is required");
    assert!(
        !accepts(&g, &call(&[("days", "3"), ("city", "Oslo")])),
        "required first"
    );
    assert!(
        !accepts(&g, &call(&[("city", "Reykjavik")])),
        "longer than 8"
    );
    assert!(!accepts(
        &g,
        &call(&[("city", "Oslo"), ("units", "kelvin")])
    ));
}
