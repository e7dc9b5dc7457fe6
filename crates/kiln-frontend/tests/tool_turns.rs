//! A conversation with tools rendered for a tiny model whose template has no tools (kiln's
//! generic format): the tools described in the system message, past calls written as the
//! format's JSON, tool results in their turns, and the checks that refuse malformed turns.

use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_frontend::tools::{ChatTurn, ToolFormat, ToolPlan};
use kiln_frontend::{Ending, Frontend};
use kiln_model::Model;
use kiln_model::testing::{TinyConfig, write_tiny_llama};
use serde_json::{Value, json};

/// The front end of a tiny model (its own folder per call: tests run in parallel).
fn frontend() -> Frontend {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("kiln-tool-turns-{}-{n}", std::process::id()));
    write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let (f, _, _) = Frontend::split(Model::load(&dir).unwrap());
    std::fs::remove_dir_all(&dir).ok();
    f
}

fn turns(v: Value) -> Vec<ChatTurn> {
    serde_json::from_value(v).unwrap()
}

fn plan(f: &Frontend) -> ToolPlan {
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    ToolPlan::parse(Some(&tools), None, None, f.tool_format)
        .unwrap()
        .unwrap()
}

#[test]
fn past_calls_and_results_render_in_the_generic_format() {
    let f = frontend();
    assert_eq!(f.tool_format, ToolFormat::Generic);
    let plan = plan(&f);
    let text = f
        .render_turns(
            turns(json!([
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call-7", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call-7", "content": [{"type": "text", "text": "-3 "}, {"type": "text", "text": "degrees"}]},
            ])),
            Some(&plan),
            None,
            Ending::NewTurn,
        )
        .unwrap();
    let system = plan.system_prompt().unwrap();
    assert!(text.contains(&system), "{text}");
    assert!(system.contains("get_weather"), "{system}");
    // The call as the generic format's JSON (arguments parsed back, not encoded twice), the
    // result in its own turn, then the assistant's header.
    let call = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}"#;
    let (at_call, at_result) = (text.find(call).unwrap(), text.find("-3 degrees").unwrap());
    assert!(at_call < at_result, "{text}");
    assert!(text.trim_end().ends_with("assistant"), "{text}");
}

#[test]
fn malformed_turns_are_refused_by_name() {
    let f = frontend();
    let refused = |v: Value| {
        let e = f
            .render_turns(turns(v), Some(&plan(&f)), None, Ending::NewTurn)
            .unwrap_err();
        assert_eq!(e.param, "messages");
        e.message
    };
    let call = json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"}}]});
    let user = json!({"role": "user", "content": "Hi"});
    let m = refused(json!([user, {"role": "tool", "tool_call_id": "c1", "content": "x"}]));
    assert!(
        m.contains("`c1`") && m.contains("no earlier assistant"),
        "{m}"
    );
    let m = refused(json!([user, call, {"role": "tool", "content": "x"}]));
    assert!(m.contains("needs the tool_call_id"), "{m}");
    let m = refused(
        json!([user, call, {"role": "tool", "tool_call_id": "c1", "name": "other", "content": "x"}]),
    );
    assert!(m.contains("`other`") && m.contains("get_weather"), "{m}");
    let m = refused(json!([{"role": "user", "content": "Hi", "tool_calls": call["tool_calls"]}]));
    assert!(
        m.contains("only assistant messages carry tool_calls"),
        "{m}"
    );
    let m = refused(json!([{"role": "user", "content": "Hi", "reasoning_content": "hm"}]));
    assert!(m.contains("reasoning_content"), "{m}");
    let bad_args = json!({"role": "assistant", "tool_calls": [{"id": "c2", "type": "function",
        "function": {"name": "get_weather", "arguments": "{not json"}}]});
    let m = refused(json!([user, bad_args]));
    assert!(m.contains("not JSON"), "{m}");
    let m = refused(
        json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
    );
    assert!(m.contains("`image_url`"), "{m}");
    // A field OpenAI's messages do not have is an error, not ignored.
    let e = serde_json::from_value::<Vec<ChatTurn>>(
        json!([{"role": "user", "content": "Hi", "colour": 1}]),
    )
    .unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
}
