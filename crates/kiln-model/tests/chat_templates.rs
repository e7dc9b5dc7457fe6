//! The chat templates of the supported model families (SmolLM2, Qwen2.5, Llama 3.2, Mistral
//! Nemo), rendered by kiln and compared with renders made by Hugging Face transformers
//! (`scripts/chat-template-renders.py` wrote `expected.json`): plain chats, several turns,
//! tools, and a tool-call round trip. Where transformers raised, kiln must refuse too.

use std::path::PathBuf;

use kiln_model::{ChatInput, ChatMessage, ChatTemplate};
use serde_json::{Map, Value};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat_templates")
}

fn read_json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(data().join(name)).unwrap()).unwrap()
}

#[test]
fn templates_render_as_transformers_does() {
    let cases = read_json("cases.json");
    let expected = read_json("expected.json");
    let tools: Vec<Value> = serde_json::from_value(cases["tools"].clone()).unwrap();
    let kwargs: Map<String, Value> = serde_json::from_value(cases["kwargs"].clone()).unwrap();
    let mut checked = 0;
    for (tname, t) in cases["templates"].as_object().unwrap() {
        let source = std::fs::read_to_string(data().join(t["file"].as_str().unwrap())).unwrap();
        let template = ChatTemplate::new(
            &source,
            t["bos_token"].as_str().unwrap(),
            t["eos_token"].as_str().unwrap(),
            tname,
        )
        .unwrap();
        for (cname, conv) in cases["conversations"].as_object().unwrap() {
            let messages: Vec<ChatMessage> =
                serde_json::from_value(conv["messages"].clone()).unwrap();
            for (prompt, suffix) in [(true, "prompt"), (false, "no-prompt")] {
                let key = format!("{tname}/{cname}/{suffix}");
                let got = template.render_input(&ChatInput {
                    messages: &messages,
                    tools: conv.get("tools").map(|_| tools.as_slice()),
                    add_generation_prompt: prompt,
                    kwargs: Some(&kwargs),
                });
                let want = &expected[&key];
                match (got, want["text"].as_str()) {
                    (Ok(got), Some(want)) => assert_eq!(got, want, "{key}"),
                    (Err(e), None) => assert!(!e.to_string().is_empty(), "{key}"),
                    (got, _) => panic!("{key}: kiln gave {got:?}, transformers gave {want}"),
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, expected.as_object().unwrap().len());
}

#[test]
fn tool_reading_templates_are_told_apart() {
    let read = |f: &str| {
        let source = std::fs::read_to_string(data().join(f)).unwrap();
        ChatTemplate::new(&source, "", "", f).unwrap().reads_tools()
    };
    assert!(!read("smollm2.jinja"));
    assert!(read("qwen2.5.jinja"));
    assert!(read("llama3.2.jinja"));
    assert!(read("mistral-nemo.jinja"));
}

#[test]
fn strftime_now_reads_the_clock() {
    let t = ChatTemplate::new("{{ strftime_now('%Y') }}", "", "", "t").unwrap();
    let year: i32 = t.render(&[], false).unwrap().parse().unwrap();
    assert!(year >= 2026, "{year}");
}

#[test]
fn loop_controls_and_python_methods_work() {
    let src = "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}\
               {{ m.content.strip().upper() }}{% if loop.index > 2 %}{% break %}{% endif %}\
               {% endfor %}";
    let t = ChatTemplate::new(src, "", "", "t").unwrap();
    let msgs = [
        ChatMessage::new("system", "s"),
        ChatMessage::new("user", " a "),
        ChatMessage::new("assistant", "b"),
        ChatMessage::new("user", "c"),
    ];
    assert_eq!(t.render(&msgs, false).unwrap(), "AB");
}

/// An assistant turn's reasoning reaches templates as `reasoning_content` and as `thinking`;
/// a turn without any has neither (a template's `if m.thinking` is false).
#[test]
fn reasoning_is_given_by_both_names() {
    let src = "{% for m in messages %}[{{ m.reasoning_content }}|{{ m.thinking }}|\
               {{ 'thinking' in m }}]{% endfor %}";
    let t = ChatTemplate::new(src, "", "", "t").unwrap();
    let mut reply = ChatMessage::new("assistant", "b");
    reply.reasoning_content = Some("r".into());
    let msgs = [ChatMessage::new("user", "a"), reply];
    assert_eq!(t.render(&msgs, false).unwrap(), "[||False][r|r|True]");
}
