//! Python call lists: parsing, streaming, typed grammars, integer ranges, detection.

use super::*;

#[test]
fn pythonic_replies_are_a_list_of_calls() {
    let f = ToolFormat::Pythonic;
    let text = r#"[get_weather(city="Oslo", days=3, units='metric'), get_time(), note(tags=["a", 'b'], opts={"x": 1.5, 'y': None}, ok=True,)]"#;
    let (content, calls) = f.parse(text);
    assert_eq!(content, None);
    assert_eq!(
        calls,
        vec![
            (
                "get_weather".into(),
                r#"{"city": "Oslo", "days": 3, "units": "metric"}"#.into()
            ),
            ("get_time".into(), "{}".into()),
            (
                "note".into(),
                r#"{"tags": ["a", "b"], "opts": {"x": 1.5, "y": null}, "ok": true}"#.into()
            ),
        ]
    );
    // Escapes, Llama 4's markers, and surrounding whitespace.
    let (_, calls) =
        f.parse(" <|python_start|>[say(text=\"a \\\"b\\\"\\n\\u00e9\")]<|python_end|> ");
    assert_eq!(
        calls,
        vec![("say".into(), r#"{"text": "a \"b\"\né"}"#.into())]
    );
    // Anything that is not a whole call list is text.
    for text in [
        "Oslo is cold.",
        "[1, 2, 3]",
        "[get(city=\"Oslo\")] and more",
        "[get(city=\"Oslo\"",
        "[get(\"Oslo\")]",
        "[]",
    ] {
        assert_eq!(f.parse(text), (Some(text.into()), vec![]), "{text}");
    }
}

#[test]
fn pythonic_calls_stream_whole_once_closed() {
    let p = |t: &str| crate::tools::format::pythonic::partial(t);
    assert_eq!(p(""), (String::new(), vec![]));
    assert_eq!(p("<|python_"), (String::new(), vec![]));
    assert_eq!(p("Oslo"), ("Oslo".into(), vec![]));
    assert_eq!(p("[get_wea"), (String::new(), vec![]));
    assert_eq!(
        p("[get_weather(city=\"Os"),
        (String::new(), vec![("get_weather".into(), String::new())])
    );
    assert_eq!(
        p("[get_weather(city=\"Oslo\"), get_ti"),
        (
            String::new(),
            vec![("get_weather".into(), r#"{"city": "Oslo"}"#.into())]
        )
    );
    let (_, calls) = p("[get_weather(city=\"Oslo\"), get_time(");
    assert_eq!(calls.len(), 2);
}

#[test]
fn pythonic_grammars_type_each_argument() {
    let offered = [
        (
            "get_weather",
            json!({"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 8},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "units": {"enum": ["metric", "imperial"]},
                "hourly": {"type": "boolean"},
            }, "required": ["city"]}),
        ),
        ("get_time", json!({"type": "object", "properties": {}})),
    ];
    let required = ToolFormat::Pythonic.calls_grammar(&offered, false, true);
    for ok in [
        r#"[get_weather(city="Oslo")]"#,
        r#"[get_weather(city="Oslo", days=3, hourly=False)]"#,
        r#"[get_weather(city='Oslo', units="imperial"), get_time()]"#,
    ] {
        assert!(accepts(&required, ok), "{ok}");
    }
    for bad in [
        "Oslo is cold.",
        r#"[get_weather(days=3)]"#,
        r#"[get_weather(city="Oslo", days="3")]"#,
        r#"[get_weather(city="Oslo", units="kelvin")]"#,
        r#"[get_weather(city="Oslo", hourly=true)]"#,
        r#"[get_weather(city="Stockholm")]"#,
        r#"[get_weather(city="Oslo", days=15)]"#,
        r#"[get_weather(city="Oslo", days=0)]"#,
        r#"[get_weather(hourly=False, city="Oslo")]"#,
        r#"[put(x=1)]"#,
    ] {
        assert!(!accepts(&required, bad), "{bad}");
    }
    let single = ToolFormat::Pythonic.calls_grammar(&offered, false, false);
    assert!(!accepts(&single, r#"[get_time(), get_time()]"#));
    let auto = ToolFormat::Pythonic.calls_grammar(&offered, true, true);
    assert!(accepts(&auto, "Oslo is cold."));
    assert!(accepts(&auto, r#"[get_time()]"#));
    assert!(!accepts(&auto, r#"[get_time(x=1)]"#));
    // A nested object is a dict of its properties, typed (and one with optional keys inside
    // another, named apart).
    let place = json!({"type": "object", "properties": {
        "city": {"type": "string"},
        "at": {"type": "object", "properties": {
            "lat": {"type": "number"}, "lon": {"type": "number"},
            "note": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}},
            "required": ["lat"]},
        "tags": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}}},
        "required": ["city", "at"]});
    let g = ToolFormat::Pythonic.calls_grammar(&[("go", place)], false, true);
    for ok in [
        r#"[go(city="Oslo", at={"lat": 59.9})]"#,
        r#"[go(city="Oslo", at={"lat": 59.9, "lon": 10.7, "note": {"y": 2}}, tags={"b": True})]"#,
        r#"[go(city="Oslo", at={"lat": 1, "note": {}}, tags={})]"#,
    ] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in [
        r#"[go(city="Oslo", at={})]"#,
        r#"[go(city="Oslo", at={"lat": "north"})]"#,
        r#"[go(city="Oslo", at={"lat": 1, "alt": 3})]"#,
        r#"[go(city="Oslo", at={"lon": 1, "lat": 2})]"#,
        r#"[go(city="Oslo", at={"lat": 1, "note": {"x": 1.5}})]"#,
        r#"[go(city="Oslo", at={"lat": 1}, tags={"a": 1})]"#,
    ] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    // Each call's JSON arguments fit the tool's schema.
    let (_, calls) = ToolFormat::Pythonic.parse(r#"[get_weather(city="Oslo", days=3)]"#);
    assert_eq!(calls[0].1, r#"{"city": "Oslo", "days": 3}"#);
}

#[test]
fn the_pythonic_format_is_read_from_the_template() {
    let t = ChatTemplate::new(
        "{% if tools %}Call them as [func_name1(params_name1=params_value1), func_name2(params)]: {{ tools | tojson }}{% endif %}\"parameters\": ",
        "",
        "",
        "test",
    )
    .unwrap();
    assert_eq!(
        ToolFormat::detect(Some(&t), &tiny_tokenizer(false)),
        ToolFormat::Pythonic
    );
}

#[test]
fn integer_ranges_are_regular_expressions() {
    let re = |min, max| {
        regex::Regex::new(&format!(
            "^{}$",
            crate::tools::format::pythonic::int_regex(min, max)
        ))
        .unwrap()
    };
    for (min, max) in [
        (Some(-99), Some(999)),
        (Some(0), Some(9)),
        (Some(5), Some(123)),
        (Some(-40), Some(-7)),
        (Some(17), None),
        (None, Some(-3)),
        (None, Some(250)),
        (Some(-1000), Some(1000)),
        (Some(1), Some(1)),
        (Some(3), Some(2)),
    ] {
        let r = re(min, max);
        for n in -1200i64..=1200 {
            let want = min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m);
            assert_eq!(
                r.is_match(&n.to_string()),
                want,
                "{n} in {min:?}..={max:?}: {r}"
            );
        }
        for text in ["007", "-0", "+5", "1.0", ""] {
            assert!(!r.is_match(text), "{text}: {r}");
        }
        if max.is_none() {
            assert!(r.is_match("123456789012"), "{r}");
        }
    }
}

#[test]
fn a_parser_named_as_vllm_names_it_overrides_the_template() {
    let tok = tiny_tokenizer(false);
    let reads =
        ChatTemplate::new("{% if tools %}{{ tools | tojson }}{% endif %}", "", "", "t").unwrap();
    let plain = ChatTemplate::new("{{ messages[0]['content'] }}", "", "", "t").unwrap();
    let named = |n: &str, t: &ChatTemplate| ToolFormat::named(n, Some(t), &tok);
    assert_eq!(named("pythonic", &reads), Ok(ToolFormat::Pythonic));
    assert_eq!(named("llama4_pythonic", &reads), Ok(ToolFormat::Pythonic));
    assert_eq!(named("hermes", &reads), Ok(ToolFormat::Hermes));
    assert_eq!(named("llama3_json", &reads), Ok(ToolFormat::Llama3));
    assert_eq!(
        named("mistral", &reads),
        Ok(ToolFormat::Mistral { open: None })
    );
    assert_eq!(named("auto", &reads), Ok(ToolFormat::Generic));
    assert_eq!(named("kiln", &plain), Ok(ToolFormat::Generic));
    let err = named("hermes", &plain).unwrap_err();
    assert!(err.contains("does not render `tools`"), "{err}");
    let err = named("granite", &reads).unwrap_err();
    assert!(
        err.starts_with("granite: not a tool-call parser") && err.contains("pythonic"),
        "{err}"
    );
}
