//! Mistral's tool calls: Mistral-Nemo's `[TOOL_CALLS]` array with nine-character ids, and
//! the later `[TOOL_CALLS]name[ARGS]{..}` form with both markers as special tokens.

use super::*;

#[tokio::test]
async fn mistral_calls_follow_its_opener_with_nine_character_ids() {
    let base = tiny_with(MISTRAL_TEMPLATE);
    // A past call whose id is not Mistral's renders (the template raises on such ids): the
    // call and the tool message answering it are given the same 9-character id.
    let text = rendered_by(&base, &round_trip()).await;
    assert!(
        text.contains(
            r#"[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather""#
        ),
        "{text}"
    );
    let id_after = |key: &str| {
        let at = text.find(key).unwrap_or_else(|| panic!("{key} in {text}")) + key.len();
        text[at..at + 9].to_string()
    };
    let (call_id, answer_id) = (id_after(r#", "id": ""#), id_after(r#""call_id": ""#));
    assert!(mistral_id(&call_id), "{text}");
    assert_eq!(call_id, answer_id, "{text}");
    assert!(
        text.contains(
            r#"[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": ""#
        ),
        "{text}"
    );

    required_calls_are_mistrals(&base).await;
}

/// A call to `get_weather` with an id of kiln's form, and the tool's answer.
fn round_trip() -> Value {
    json!({"model": "tiny", "tools": tools(), "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"}
    ]})
}

/// Sampled `required` replies from `base` (a Mistral template) that finish are calls only,
/// with Mistral's ids, and stream as they are whole.
async fn required_calls_are_mistrals(base: &str) {
    let mut finished = 0;
    for seed in 0..3 {
        let ask = json!({"model": "tiny", "tools": tools(), "tool_choice": "required", "seed": seed,
            "temperature": 1.0, "max_tokens": 200, "n": 2,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]});
        let (s, r) = post(base, "/v1/chat/completions", &ask).await;
        assert_eq!(s, 200, "{r}");
        for c in r["choices"].as_array().unwrap() {
            if c["finish_reason"] == "length" {
                continue;
            }
            assert_eq!(c["finish_reason"], "tool_calls", "{c}");
            assert!(c["message"]["content"].is_null(), "{c}");
            assert!(
                check_calls_with(c, &["get_weather", "add"], mistral_id) >= 1,
                "{c}"
            );
            finished += 1;
        }
    }
    assert!(finished > 0, "no choice finished");
    compare_streamed(base, mistral_id).await;
}

#[tokio::test]
async fn later_mistral_calls_are_named_then_marked_by_args() {
    // Both markers special tokens, as in those models' tokenizers: the reply is read with
    // them kept, and their text never reaches the client.
    let base = tiny_with_specials(MISTRAL_ARGS_TEMPLATE, &["[TOOL_CALLS]", "[ARGS]"]);
    let text = rendered_by(&base, &round_trip()).await;
    assert!(text.contains("[AVAILABLE_TOOLS][{"), "{text}");
    assert!(
        text.contains(r#"[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}"#),
        "{text}"
    );
    assert!(text.contains("[TOOL_RESULTS]-3 C[/TOOL_RESULTS]"), "{text}");

    required_calls_are_mistrals(&base).await;

    // Under `auto` the random model writes text, calls after it, or both: its text carries
    // no marker and no end-of-sequence text.
    let mut finished = 0;
    for seed in 0..6 {
        let ask = json!({"model": "tiny", "tools": tools(), "seed": seed, "max_tokens": 120,
            "temperature": 1.0, "messages": [{"role": "user", "content": "hi"}]});
        let (s, r) = post(&base, "/v1/chat/completions", &ask).await;
        assert_eq!(s, 200, "{r}");
        let c = &r["choices"][0];
        if c["finish_reason"] == "length" {
            continue;
        }
        let content = c["message"]["content"].as_str().unwrap_or_default();
        for special in ["[TOOL_CALLS]", "[ARGS]", "<|im_end|>", "<|endoftext|>"] {
            assert!(!content.contains(special), "{c}");
        }
        check_calls_with(c, &["get_weather", "add"], mistral_id);
        finished += 1;
    }
    assert!(finished > 0, "no auto reply finished");
}
