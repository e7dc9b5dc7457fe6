//! Reasoning set apart from the answer (`reasoning_content`): the tiny random model given a
//! chat template that knows `<think>` blocks (and opens one in the prompt when asked), against
//! the same model on a server that leaves replies as written (`--reasoning-parser none`) where
//! both sample from the same tokens (no grammar), and streamed against whole replies. With
//! them, the server-wide defaults of vLLM's flags (template variables, token ids as names,
//! usage on every stream).

mod common;

use std::sync::OnceLock;

use common::*;
use kiln_frontend::ReasoningFormat;
use serde_json::{Value, json};

fn config() -> kiln_model::testing::TinyConfig {
    kiln_model::testing::TinyConfig {
        chat_template: Some(kiln_model::testing::tiny_tokenizer::TOOLS_THINK_TEMPLATE.into()),
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

fn text_of(m: &Value, key: &str) -> String {
    m[key].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn a_block_the_template_opened_makes_the_reply_reasoning() {
    let (split, raw_server) = servers();
    let body = json!({"model": "tiny", "seed": 5, "temperature": 1.0, "max_tokens": 12,
        "messages": [{"role": "user", "content": "Why?"}],
        "chat_template_kwargs": {"enable_thinking": true}});
    let raw = text_of(&message(raw_server, &body).await, "content");
    assert!(!raw.is_empty() && !raw.contains("</think>"), "{raw}");
    // Cut by max_tokens inside the block: all of it is reasoning.
    let m = message(split, &body).await;
    assert_eq!(
        text_of(&m, "reasoning_content"),
        raw.trim_matches('\n'),
        "{m}"
    );
    assert_eq!(m["content"], "", "{m}");
    let (r, c) = streamed(split, &body).await;
    assert_eq!((r.as_str(), c.as_str()), (raw.trim_matches('\n'), ""));
}

#[tokio::test]
async fn a_grammar_holds_after_the_reasoning() {
    let (split, raw_server) = servers();
    let tools = json!([{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]);
    let ask = |extra: Value| {
        let mut body = json!({"model": "tiny", "seed": 9, "temperature": 1.0, "max_tokens": 12,
            "messages": [{"role": "user", "content": "Why?"}],
            "chat_template_kwargs": {"enable_thinking": true}});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for extra in [
        json!({"response_format": {"type": "json_object"}}),
        json!({"tools": tools, "tool_choice": "auto"}),
        json!({"tools": tools, "tool_choice": "required"}),
    ] {
        let body = ask(extra);
        // Where the reply is not split, the grammar holds from the first token.
        let raw = message(raw_server, &body).await;
        assert!(
            raw["content"]
                .as_str()
                .is_none_or(|c| !c.contains("</think>")),
            "{raw}"
        );
        // Split, the template's open block comes first: the random model stays in it
        // (reasoning until cut, no answer and no call) whatever the grammar.
        let m = message(split, &body).await;
        let r = text_of(&m, "reasoning_content");
        assert!(!r.is_empty() && !r.contains("</think>"), "{m}");
        // Not the grammar's text (held from the first token, it would open with it).
        assert!(!r.starts_with('{') && !r.starts_with("<tool_call>"), "{m}");
        assert_eq!(text_of(&m, "content"), "", "{m}");
        assert!(m["tool_calls"].is_null(), "{m}");
        assert_eq!(streamed(split, &body).await, (r, String::new()));
    }
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

/// `usage.completion_tokens_details.reasoning_tokens` counts the tokens that wrote the
/// reasoning, whole and streamed, with tools too; a server that does not split reports none.
#[tokio::test]
async fn usage_counts_the_reasoning_tokens() {
    let (split, raw_server) = servers();
    let tools = json!([{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]);
    for extra in [json!({}), json!({"tools": tools})] {
        let mut body = json!({"model": "tiny", "seed": 5, "temperature": 1.0, "max_tokens": 12,
            "messages": [{"role": "user", "content": "Why?"}],
            "chat_template_kwargs": {"enable_thinking": true}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (s, whole) = post(split, "/v1/chat/completions", &body).await;
        assert_eq!(s, 200, "{whole}");
        let usage = &whole["usage"];
        let reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap();
        // Cut inside the block: the reply is all reasoning.
        let thought = whole["choices"][0]["message"]["reasoning_content"]
            .as_str()
            .unwrap();
        assert!(!thought.is_empty(), "{whole}");
        let completion = usage["completion_tokens"].as_u64().unwrap();
        assert_eq!(reasoning, completion, "{usage}");
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let chunks = stream(split, "/v1/chat/completions", &streamed).await;
        let last = chunks.last().unwrap();
        assert_eq!(last["usage"], *usage, "{extra}");
        let (_, raw) = post(raw_server, "/v1/chat/completions", &body).await;
        assert_eq!(
            raw["usage"]["completion_tokens_details"]["reasoning_tokens"],
            0
        );
    }
}

/// `thinking_token_budget` bounds the block: once spent, `</think>` is written for the random
/// model (which never closes one itself) and the reply goes on as its answer. The Messages
/// API's `thinking` budget is the same bound.
#[tokio::test]
async fn a_thinking_budget_closes_the_block() {
    let (split, raw_server) = servers();
    let body = |budget: Value| {
        json!({"model": "tiny", "temperature": 0.0, "max_tokens": 30,
            "messages": [{"role": "user", "content": "Why?"}],
            "chat_template_kwargs": {"enable_thinking": true}, "thinking_token_budget": budget})
    };
    // A budget the reply cannot reach: the same constrained sampling (which keeps the text
    // whole UTF-8), never forced.
    let unbounded = text_of(
        &message(split, &body(json!(1000))).await,
        "reasoning_content",
    );
    let (s, r) = post(split, "/v1/chat/completions", &body(json!(5))).await;
    assert_eq!(s, 200, "{r}");
    let m = &r["choices"][0]["message"];
    let reasoning = text_of(m, "reasoning_content");
    // The same greedy start, cut after five tokens.
    assert!(
        !reasoning.is_empty() && unbounded.starts_with(&reasoning),
        "{m} {unbounded:?}"
    );
    assert!(reasoning.len() < unbounded.len(), "{m}");
    let (s, t) = post(
        split,
        "/tokenize",
        &json!({"model": "tiny", "prompt": "</think>"}),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let close = t["tokens"].as_array().unwrap().len() as u64;
    let usage = &r["usage"];
    assert_eq!(
        usage["completion_tokens_details"]["reasoning_tokens"],
        json!(5 + close),
        "{usage}"
    );
    // The answer after the block: the rest of the tokens.
    let answer = usage["completion_tokens"].as_u64().unwrap() - 5 - close;
    assert!(
        answer > 0 || r["choices"][0]["finish_reason"] == "stop",
        "{r}"
    );
    assert_eq!(
        streamed(split, &body(json!(5))).await,
        (reasoning.clone(), text_of(m, "content"))
    );
    // A server that does not split has no reasoning to bound.
    let raw = |b| async move { text_of(&message(raw_server, &b).await, "content") };
    assert_eq!(raw(body(json!(5))).await, raw(body(Value::Null)).await);
    let (s, e) = post(split, "/v1/chat/completions", &body(json!(-1))).await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("thinking_token_budget"))
    );

    let ask = json!({"model": "tiny", "max_tokens": 30, "temperature": 0.0,
        "thinking": {"type": "enabled", "budget_tokens": 5},
        "messages": [{"role": "user", "content": "Why?"}]});
    let (s, msg) = post(split, "/v1/messages", &ask).await;
    assert_eq!(s, 200, "{msg}");
    let blocks = msg["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "thinking", "{msg}");
    assert_eq!(blocks[0]["thinking"], json!(reasoning), "{msg}");
}

/// `reasoning_effort` (and the Responses API's `reasoning.effort`) reaches a template that
/// reads it; one that does not is refused, since it would change nothing.
#[tokio::test]
async fn reasoning_effort_reaches_a_template_that_reads_it() {
    let template = concat!(
        "{%- if reasoning_effort is defined -%}",
        "{{ '<|im_start|>system\\nReasoning: ' + reasoning_effort + '<|im_end|>\\n' }}",
        "{%- endif -%}",
        "{%- for m in messages -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}",
        "{%- endfor -%}{{ '<|im_start|>assistant\\n' }}",
    );
    let base = start_tiny_model(&kiln_model::testing::TinyConfig {
        chat_template: Some(template.into()),
        ..Default::default()
    });
    let body = |effort: Value| {
        json!({"model": "tiny", "max_tokens": 2, "reasoning_effort": effort,
            "messages": [{"role": "user", "content": "Why?"}]})
    };
    let (s, r) = post(&base, "/v1/chat/completions/render", &body(json!("high"))).await;
    assert_eq!(s, 200, "{r}");
    let (_, t) = post(
        &base,
        "/detokenize",
        &json!({"tokens": r["token_ids"], "model": "tiny"}),
    )
    .await;
    let prompt = t["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with("<|im_start|>system\nReasoning: high<|im_end|>"),
        "{prompt}"
    );
    for (base, effort) in [(&base, json!("extreme")), (&servers().0, json!("low"))] {
        let (s, e) = post(base, "/v1/chat/completions", &body(effort)).await;
        assert_eq!(
            (s, e["error"]["param"].as_str()),
            (400, Some("reasoning_effort")),
            "{e}"
        );
    }
    let ask = json!({"model": "tiny", "input": "Why?", "max_output_tokens": 2,
        "reasoning": {"effort": "medium"}});
    let (s, r) = post(&base, "/v1/responses", &ask).await;
    assert_eq!(
        (s, &r["reasoning"]["effort"]),
        (200, &json!("medium")),
        "{r}"
    );
    let (s, e) = post(&servers().0, "/v1/responses", &ask).await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("reasoning.effort")),
        "{e}"
    );
}

/// vLLM's server-wide defaults: `--default-chat-template-kwargs` under each request's own
/// (which wins key by key), `--return-tokens-as-token-ids` unless a request says otherwise,
/// `--enable-force-include-usage` on every stream.
#[tokio::test]
async fn server_defaults_hold_where_a_request_does_not_say() {
    static BASE: OnceLock<String> = OnceLock::new();
    let base = BASE.get_or_init(|| {
        start_tiny_model_with(&config(), |sc, _| {
            sc.default_chat_template_kwargs = json!({"enable_thinking": true})
                .as_object()
                .unwrap()
                .clone();
            sc.return_tokens_as_token_ids = true;
            sc.force_include_usage = true;
        })
    });
    let (plain, _) = servers();
    let prompt_text = |base: String, kwargs: Value| async move {
        let mut body = json!({"model": "tiny", "messages": [{"role": "user", "content": "Why?"}]});
        if !kwargs.is_null() {
            body["chat_template_kwargs"] = kwargs;
        }
        let (s, r) = post(&base, "/v1/chat/completions/render", &body).await;
        assert_eq!(s, 200, "{r}");
        let (s, t) = post(&base, "/detokenize", &json!({"tokens": r["token_ids"]})).await;
        assert_eq!(s, 200, "{t}");
        t["prompt"].as_str().unwrap().to_string()
    };
    let opened = prompt_text(base.clone(), Value::Null).await;
    assert!(opened.ends_with("assistant\n<think>\n"), "{opened:?}");
    assert!(
        !prompt_text(plain.clone(), Value::Null)
            .await
            .contains("<think>")
    );
    let asked = prompt_text(base.clone(), json!({"enable_thinking": false})).await;
    assert!(!asked.contains("<think>"), "{asked:?}");

    let body = json!({"model": "tiny", "seed": 5, "max_tokens": 3, "logprobs": true,
        "messages": [{"role": "user", "content": "Why?"}], "chat_template_kwargs": {"enable_thinking": false}});
    let names = |r: &Value| -> Vec<String> {
        let lp = r["choices"][0]["logprobs"]["content"].as_array().unwrap();
        lp.iter()
            .map(|t| t["token"].as_str().unwrap().to_string())
            .collect()
    };
    let (s, r) = post(base, "/v1/chat/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    assert!(names(&r).iter().all(|n| n.starts_with("token_id:")), "{r}");
    let mut own = body.clone();
    own["return_tokens_as_token_ids"] = json!(false);
    let (s, r) = post(base, "/v1/chat/completions", &own).await;
    assert_eq!(s, 200, "{r}");
    assert!(names(&r).iter().all(|n| !n.starts_with("token_id:")), "{r}");

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let chunks = stream(base, "/v1/chat/completions", &streamed).await;
    let last = chunks.last().unwrap();
    assert_eq!(last["usage"]["completion_tokens"], 3, "{last}");
    let plain_chunks = stream(plain, "/v1/chat/completions", &streamed).await;
    assert!(plain_chunks.iter().all(|c| c["usage"].is_null()));
}

/// gpt-oss's harmony format: a thinking budget bounds its `analysis` messages (then
/// `<|end|>` is written and the next message is not reasoning), also under a response
/// format, which holds its `final` message.
#[tokio::test]
async fn a_thinking_budget_ends_a_harmony_reasoning_message() {
    let base = start_tiny_model_with(&config(), |sc, _| {
        sc.reasoning = Some(ReasoningFormat::Harmony);
    });
    // `a` pushed up: the random model opens an `analysis` message and writes `a`s in it
    // (and in any header that lets it, so only a response format gets it to an answer).
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
        "maximum": 9}}, "required": ["n"], "additionalProperties": false});
    let format = json!({"type": "json_schema", "json_schema": {"name": "n", "schema": schema}});
    let body = |budget: Value, format: &Value| {
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 120,
            "temperature": 0.0, "logit_bias": {"97": 100}, "thinking_token_budget": budget,
            "response_format": format})
    };
    let unbounded = message(&base, &body(Value::Null, &format)).await;
    let long = text_of(&unbounded, "reasoning_content");
    assert!(
        long.len() > 60 && long.bytes().all(|b| b == b'a'),
        "{unbounded}"
    );
    assert_eq!(text_of(&unbounded, "content"), "", "{unbounded}");
    for budget in [0, 2] {
        let (s, r) = post(&base, "/v1/chat/completions", &body(json!(budget), &format)).await;
        assert_eq!(s, 200, "{r}");
        let m = &r["choices"][0]["message"];
        assert_eq!(text_of(m, "reasoning_content"), "a".repeat(budget), "{r}");
        assert_eq!(r["choices"][0]["finish_reason"], "stop", "{r}");
        let content = text_of(m, "content");
        let v: Value = serde_json::from_str(&content).unwrap();
        assert!(v["n"].as_u64().is_some_and(|n| n <= 9), "{r}");
        let streamed = streamed(&base, &body(json!(budget), &format)).await;
        assert_eq!(streamed, ("a".repeat(budget), content));
        // Without a response format too.
        let m = message(&base, &body(json!(budget), &Value::Null)).await;
        assert_eq!(text_of(&m, "reasoning_content"), "a".repeat(budget), "{m}");
    }
    let (s, r) = post(
        &base,
        "/v1/chat/completions",
        &body(json!(-1), &Value::Null),
    )
    .await;
    assert_eq!(
        (s, r["error"]["param"].as_str()),
        (400, Some("thinking_token_budget"))
    );

    // A response format holds the `final` message's text; the content is that text alone.
    // (`a`, which would open an `analysis` message a random model rarely ends, is biased
    // against.)
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
        "maximum": 9}}, "required": ["n"], "additionalProperties": false});
    let body = json!({"messages": [{"role": "user", "content": "n?"}], "max_tokens": 40,
        "logit_bias": {"97": -100},
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}});
    let (s, r) = post(&base, "/v1/chat/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["choices"][0]["finish_reason"], "stop", "{r}");
    let content = r["choices"][0]["message"]["content"].as_str().unwrap();
    let v: Value = serde_json::from_str(content).unwrap();
    assert!(v["n"].as_u64().is_some_and(|n| n <= 9), "{r}");
    // The reply wrote the message's header too (`<|channel|>final<|message|>`, a token a
    // character or two in the tiny vocabulary) before the 8 characters of its text.
    let written = r["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(written >= 8 + 20, "{r}");
}
