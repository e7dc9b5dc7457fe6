//! Reasoning set apart from the answer (`reasoning_content`): the tiny random model given a
//! chat template that knows `<think>` blocks (and opens one in the prompt when asked), against
//! the same model on a server that leaves replies as written (`--reasoning-parser none`), so
//! every split is checked against the raw text of the same seeded reply.

mod common;

use std::sync::OnceLock;

use common::*;
use kiln_frontend::ReasoningFormat;
use serde_json::{Value, json};

/// ChatML with past reasoning rendered in a block, and the block opened after the
/// generation prompt when `enable_thinking` is set; tools in a system turn, called in
/// Hermes-style `<tool_call>` blocks.
const TEMPLATE: &str = concat!(
    "{%- if tools -%}{{ '<|im_start|>system\\n' + tools|tojson + ' <tool_call><|im_end|>\\n' }}{%- endif -%}",
    "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' }}",
    "{%- if m.reasoning_content -%}{{ '<think>\\n' + m.reasoning_content + '\\n</think>\\n\\n' }}{%- endif -%}",
    "{{ m.content + '<|im_end|>\\n' }}{%- endfor -%}",
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}",
    "{%- if enable_thinking -%}{{ '<think>\\n' }}{%- endif -%}{%- endif -%}",
);

fn config() -> kiln_model::testing::TinyConfig {
    kiln_model::testing::TinyConfig {
        chat_template: Some(TEMPLATE.into()),
        ..Default::default()
    }
}

/// The server that splits (its format read from the template) and the one that does not.
fn servers() -> &'static (String, String) {
    static BASES: OnceLock<(String, String)> = OnceLock::new();
    BASES.get_or_init(|| {
        let split = start_tiny_model(&config());
        let raw = start_tiny_model_with(&config(), |sc, _| {
            sc.reasoning = Some(ReasoningFormat::None);
        });
        (split, raw)
    })
}

async fn message(base: &str, body: &Value) -> Value {
    let (s, r) = post(base, "/v1/chat/completions", body).await;
    assert_eq!(s, 200, "{r}");
    r["choices"][0]["message"].clone()
}

/// A streamed reply's reasoning and content deltas, each joined.
async fn streamed(base: &str, body: &Value) -> (String, String) {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let (mut reasoning, mut content) = (String::new(), String::new());
    for c in stream(base, "/v1/chat/completions", &body).await {
        let delta = &c["choices"][0]["delta"];
        reasoning += delta["reasoning_content"].as_str().unwrap_or("");
        content += delta["content"].as_str().unwrap_or("");
    }
    (reasoning, content)
}

#[tokio::test]
async fn a_think_block_in_the_reply_is_reasoning_content() {
    let (split, raw) = servers();
    let mut checked = 0;
    for seed in 0..3 {
        // The grammar makes the random model write a block, then an answer.
        let body = json!({"model": "tiny", "seed": seed, "temperature": 1.0, "max_tokens": 64,
            "messages": [{"role": "user", "content": "Why?"}],
            "structured_outputs": {"regex": "<think>\\n[a-z]{2,5}( [a-z]{2,5}){0,2}\\n</think>\\n\\n[a-z]{2,5}"}});
        let whole = message(raw, &body).await;
        let text = whole["content"].as_str().unwrap();
        assert!(whole.get("reasoning_content").is_none(), "{whole}");
        let m = message(split, &body).await;
        let (r, c) = (
            m["reasoning_content"].as_str().unwrap(),
            m["content"].as_str().unwrap(),
        );
        assert_eq!(format!("<think>\n{r}\n</think>\n\n{c}"), text, "{m}");
        assert!(!r.is_empty() && !c.is_empty(), "{m}");
        assert_eq!(streamed(split, &body).await, (r.to_string(), c.to_string()));
        checked += 1;
    }
    assert_eq!(checked, 3);
}

#[tokio::test]
async fn a_block_the_template_opened_makes_the_reply_reasoning() {
    let (split, raw) = servers();
    let body = json!({"model": "tiny", "seed": 5, "temperature": 1.0, "max_tokens": 12,
        "messages": [{"role": "user", "content": "Why?"}],
        "chat_template_kwargs": {"enable_thinking": true}});
    let text = message(raw, &body).await["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!text.contains("</think>"), "{text}");
    // Cut by max_tokens inside the block: all of it is reasoning.
    let m = message(split, &body).await;
    assert_eq!(
        m["reasoning_content"],
        json!(text.trim_matches('\n')),
        "{m}"
    );
    assert_eq!(m["content"], "", "{m}");
    let (r, c) = streamed(split, &body).await;
    assert_eq!((r.as_str(), c.as_str()), (text.trim_matches('\n'), ""));

    // A reply held to a grammar from its first token is the answer, block or not.
    let mut json_body = body.clone();
    json_body["response_format"] = json!({"type": "json_object"});
    let want = message(raw, &json_body).await;
    let m = message(split, &json_body).await;
    assert_eq!(m["content"], want["content"], "{m}");
    assert!(m.get("reasoning_content").is_none(), "{m}");
}

#[tokio::test]
async fn past_reasoning_reaches_the_template() {
    let (split, _) = servers();
    let body = json!({"model": "tiny", "messages": [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "Because.", "reasoning_content": "Think first."},
        {"role": "user", "content": "Sure?"}]});
    let (s, r) = post(split, "/v1/chat/completions/render", &body).await;
    assert_eq!(s, 200, "{r}");
    let (s, t) = post(
        split,
        "/detokenize",
        &json!({"tokens": r["token_ids"], "model": "tiny"}),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let prompt = t["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("<|im_start|>assistant\n<think>\nThink first.\n</think>\n\nBecause."),
        "{prompt}"
    );
    let mut bad = body.clone();
    bad["messages"][0]["reasoning_content"] = json!("no");
    let (s, e) = post(split, "/v1/chat/completions", &bad).await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("messages")),
        "{e}"
    );
}

#[tokio::test]
async fn reasoning_comes_before_tool_calls() {
    let (split, raw) = servers();
    let tools = json!([{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]);
    let body = json!({"model": "tiny", "seed": 9, "temperature": 1.0, "max_tokens": 12,
        "messages": [{"role": "user", "content": "Why?"}], "tools": tools,
        "chat_template_kwargs": {"enable_thinking": true}});
    let text = message(raw, &body).await["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !text.contains("</think>") && !text.contains("<tool_call>"),
        "{text}"
    );
    // The random model stays in the block the template opened: reasoning, no call.
    let m = message(split, &body).await;
    assert_eq!(
        m["reasoning_content"],
        json!(text.trim_matches('\n')),
        "{m}"
    );
    assert!(m["tool_calls"].is_null(), "{m}");
    let (r, c) = streamed(split, &body).await;
    assert_eq!((r.as_str(), c.as_str()), (text.trim_matches('\n'), ""));
}
