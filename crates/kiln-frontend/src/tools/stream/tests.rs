//! Streaming replies under tools: each format's text fed a character at a time against the
//! whole reply's parse.

use super::*;

/// Feeds `text` a character at a time; returns the reassembled content and calls.
fn replay(format: ToolFormat, text: &str) -> (String, Vec<(String, String)>) {
    let mut s = ToolStream::new(format);
    let (mut content, mut calls) = (String::new(), Vec::<(String, String)>::new());
    let mut n = 0;
    for c in text.chars() {
        for d in s.push(&c.to_string(), || {
            n += 1;
            format!("call_{n}")
        }) {
            if let Some(t) = d["content"].as_str() {
                content.push_str(t);
            }
            for tc in d["tool_calls"].as_array().into_iter().flatten() {
                let i = tc["index"].as_u64().unwrap() as usize;
                if let Some(name) = tc["function"]["name"].as_str() {
                    assert_eq!(i, calls.len());
                    calls.push((name.to_string(), String::new()));
                }
                calls[i].1 += tc["function"]["arguments"].as_str().unwrap();
            }
        }
    }
    (content, calls)
}

#[test]
fn generic_calls_stream_their_arguments() {
    let text = r#"{"tool_calls": [{"name": "get", "arguments": {"q": "a \"}\" b", "n": [1, {"x": 2}]}}, {"name": "put", "arguments": {}}]}"#;
    let (content, calls) = replay(ToolFormat::Generic, text);
    assert_eq!(content, "");
    assert_eq!(
        calls,
        vec![
            (
                "get".into(),
                r#"{"q": "a \"}\" b", "n": [1, {"x": 2}]}"#.into()
            ),
            ("put".into(), "{}".into())
        ]
    );
    let (content, calls) = replay(ToolFormat::Generic, r#"{"response": "caf\u00e9 \"ok\"\n"}"#);
    assert_eq!((content.as_str(), calls.len()), ("café \"ok\"\n", 0));
}

#[test]
fn hermes_holds_back_a_possible_opener() {
    let text = "Let me check <b>.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    let (content, calls) = replay(ToolFormat::Hermes, text);
    assert_eq!(content, "Let me check <b>.");
    assert_eq!(calls, vec![("get".into(), r#"{"a": 1}"#.into())]);
    assert_eq!(partial(ToolFormat::Hermes, "text <tool_c").content, "text");
    let (content, _) = replay(ToolFormat::Generic, r#"{"response": "\ud83d\ude00!"}"#);
    assert_eq!(content, "😀!");
}

#[test]
fn llama3_text_or_one_call() {
    let (content, calls) = replay(
        ToolFormat::Llama3,
        "{\"name\": \"get\", \"parameters\": {}}",
    );
    assert_eq!(
        (content.as_str(), calls),
        ("", vec![("get".into(), "{}".into())])
    );
    let (content, calls) = replay(ToolFormat::Llama3, "Plain answer.");
    assert_eq!((content.as_str(), calls.len()), ("Plain answer.", 0));
}

#[test]
fn mistral_holds_back_what_may_open_calls() {
    let f = ToolFormat::Mistral { open: None };
    let calls = r#"[{"name": "get", "arguments": {"q": "a]"}}, {"name": "put", "arguments": {}}]"#;
    let want = vec![
        ("get".to_string(), r#"{"q": "a]"}"#.to_string()),
        ("put".to_string(), "{}".to_string()),
    ];
    // With the opener as text, and without it (a special token leaves no text).
    for text in [format!("{MISTRAL_OPEN}{calls}"), calls.to_string()] {
        let (content, got) = replay(f, &text);
        assert_eq!((content.as_str(), &got), ("", &want), "{text}");
    }
    for text in [
        "Plain answer.",
        "[1] A footnote.",
        "[TOOL] is a word",
        "[ {\"x\": 1} ]",
    ] {
        let (content, got) = replay(f, text);
        assert_eq!((content.as_str(), got.len()), (text, 0));
    }
    assert_eq!(partial(f, "[TOOL_CA").content, "");
    assert_eq!(partial(f, "[ {\"na").content, "");
}

#[test]
fn later_mistral_streams_text_then_each_call() {
    let f = ToolFormat::MistralArgs {
        open: None,
        args: None,
    };
    let text =
        r#"Let me [look]. [TOOL_CALLS]get[ARGS]{"q": "a}[TOOL_CALLS]"}[TOOL_CALLS]put[ARGS]{}"#;
    let (content, calls) = replay(f, text);
    let (whole_content, whole_calls) = f.parse(text);
    assert_eq!(content, whole_content.unwrap());
    assert_eq!(calls, whole_calls);
    assert_eq!(
        calls,
        vec![
            ("get".into(), r#"{"q": "a}[TOOL_CALLS]"}"#.into()),
            ("put".into(), "{}".into())
        ]
    );
    assert_eq!(content, "Let me [look].");
    // A name is sent once `[ARGS]` ends it.
    assert!(partial(f, "[TOOL_CALLS]ge").calls.is_empty());
    assert_eq!(partial(f, "Hi [TOOL_CA").content, "Hi");
    let (content, calls) = replay(f, "Plain [answer].");
    assert_eq!((content.as_str(), calls.len()), ("Plain [answer].", 0));
}

#[test]
fn glm_streams_text_then_each_call_whole() {
    let f = ToolFormat::Glm;
    let text = "Let me <look>.\n<tool_call>get\n<arg_key>q</arg_key>\n<arg_value>a </tool_call> b</arg_value>\n</tool_call>\n<tool_call>put\n</tool_call>";
    let (content, calls) = replay(f, text);
    let (whole_content, whole_calls) = f.parse(text);
    assert_eq!(content, whole_content.unwrap());
    assert_eq!(calls, whole_calls);
    assert_eq!(content, "Let me <look>.");
    assert_eq!(calls.len(), 2);
    let (content, calls) = replay(f, "Plain <answer>.");
    assert_eq!((content.as_str(), calls.len()), ("Plain <answer>.", 0));
}
