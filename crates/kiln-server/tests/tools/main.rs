//! Tool calls in a model's own format: the tiny random model given Qwen2.5's chat template,
//! which renders the tools itself and expects Hermes-style `<tool_call>` blocks (and Llama
//! 3.2's, bare JSON calls; Mistral-Nemo's, `[TOOL_CALLS]` and a JSON array; and a template
//! in the later Mistral form, `[TOOL_CALLS]name[ARGS]{..}`). The prompt is checked through
//! the render endpoint; `required` and
//! named calls must come back as valid calls (the grammar writes the syntax, the random model
//! only picks within it). This file holds the shared servers and helpers with the Qwen and
//! Llama tests; `mistral.rs` both Mistral forms; `pythonic.rs` Python call lists.

#[path = "../common/mod.rs"]
mod common;
mod glm;
mod harmony;
mod mistral;
mod pythonic;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

const QWEN_TEMPLATE: &str =
    include_str!("../../../kiln-model/tests/data/chat_templates/qwen2.5.jinja");

const LLAMA_TEMPLATE: &str =
    include_str!("../../../kiln-model/tests/data/chat_templates/llama3.2.jinja");

const MISTRAL_TEMPLATE: &str =
    include_str!("../../../kiln-model/tests/data/chat_templates/mistral-nemo.jinja");

/// A template in the later Mistral form (Mistral Small 3.1 on, Devstral, Ministral 3): tools
/// in `[AVAILABLE_TOOLS]`, each past call `[TOOL_CALLS]name[ARGS]arguments`, results in
/// `[TOOL_RESULTS]`. Written here after those models' templates, shortened.
const MISTRAL_ARGS_TEMPLATE: &str = concat!(
    "{{- bos_token }}{%- set loop_messages = messages %}",
    "{%- if messages[0]['role'] == 'system' %}",
    "{{- '[SYSTEM_PROMPT]' + messages[0]['content'] + '[/SYSTEM_PROMPT]' }}",
    "{%- set loop_messages = messages[1:] %}{%- endif %}",
    "{%- if tools %}{{- '[AVAILABLE_TOOLS]' + (tools | tojson) + '[/AVAILABLE_TOOLS]' }}{%- endif %}",
    "{%- for message in loop_messages %}",
    "{%- if message['role'] == 'user' %}{{- '[INST]' + message['content'] + '[/INST]' }}",
    "{%- elif message['role'] == 'assistant' %}",
    "{%- if message['content'] %}{{- message['content'] }}{%- endif %}",
    "{%- for call in message['tool_calls'] or [] %}",
    "{%- set arguments = call['function']['arguments'] %}",
    "{%- if arguments is not string %}{%- set arguments = arguments | tojson %}{%- endif %}",
    "{{- '[TOOL_CALLS]' + call['function']['name'] + '[ARGS]' + arguments }}",
    "{%- endfor %}{{- eos_token }}",
    "{%- elif message['role'] == 'tool' %}",
    "{{- '[TOOL_RESULTS]' + message['content'] + '[/TOOL_RESULTS]' }}",
    "{%- endif %}{%- endfor %}",
);

fn tiny_with(template: &str) -> String {
    tiny_with_specials(template, &[])
}

/// The tiny model with `template` and `specials` as more special tokens.
fn tiny_with_specials(template: &str, specials: &[&str]) -> String {
    start_tiny_model(&kiln_model::testing::TinyConfig {
        chat_template: Some(template.into()),
        // The tiny tokenizer spends a token on most characters of the tool descriptions.
        max_position_embeddings: 2048,
        extra_special_tokens: specials.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| tiny_with(QWEN_TEMPLATE))
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
            "properties": {"a": {"type": "integer", "minimum": -99, "maximum": 999}, "b": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a", "b"], "additionalProperties": false}}}
    ])
}

/// The prompt a body renders to, as text.
async fn rendered(body: &Value) -> String {
    rendered_by(server(), body).await
}

async fn rendered_by(base: &str, body: &Value) -> String {
    let (s, r) = post(base, "/v1/chat/completions/render", body).await;
    assert_eq!(s, 200, "{r}");
    let (s, t) = post(
        base,
        "/detokenize",
        &json!({"tokens": r["token_ids"], "model": "tiny"}),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    t["prompt"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_template_renders_tools_and_past_calls() {
    let body = json!({"model": "tiny", "tools": tools(), "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"}
    ]});
    let text = rendered(&body).await;
    assert!(text.contains("# Tools"), "{text}");
    assert!(text.contains(r#"{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.""#), "{text}");
    // The past call's arguments are an object in the template, not a string encoded twice.
    assert!(text.contains("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"), "{text}");
    assert!(
        text.contains("<|im_start|>user\n<tool_response>\n-3 C\n</tool_response><|im_end|>"),
        "{text}"
    );
    assert!(
        !text.contains("You can call these tools"),
        "no generic tool prompt: {text}"
    );
    // tool_choice none: the tools are not offered, the past calls still render.
    let mut none = body.clone();
    none["tool_choice"] = json!("none");
    let text = rendered(&none).await;
    assert!(
        !text.contains("# Tools") && text.contains("<tool_call>"),
        "{text}"
    );
    // chat_template_kwargs reach the template; the request's own fields cannot be overridden.
    let mut kw = body.clone();
    kw["chat_template_kwargs"] = json!({"messages": []});
    let (s, e) = post(server(), "/v1/chat/completions/render", &kw).await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("chat_template_kwargs")),
        "{e}"
    );
}

/// kiln's call ids in most formats.
fn kiln_id(id: &str) -> bool {
    id.starts_with("call-")
}

/// The call ids Mistral's templates take.
fn mistral_id(id: &str) -> bool {
    id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Every call of a finished choice names an offered tool and its arguments validate.
/// The calls of a finished choice, each checked to be an offered tool whose arguments fit
/// its parameters (`check_calls`), as (name, arguments).
fn fitting_calls(choice: &Value) -> Vec<(String, Value)> {
    check_calls(choice, &["get_weather", "add"]);
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (calls.iter())
        .map(|c| {
            let args = c["function"]["arguments"].as_str().unwrap();
            let name = c["function"]["name"].as_str().unwrap().to_string();
            (name, serde_json::from_str(args).unwrap())
        })
        .collect()
}

/// The calls `ask` streams, as (name, arguments); `whole`: for formats that send each call's
/// arguments in one piece once the call is closed (asserted).
async fn calls_streamed(base: &str, ask: &Value, whole: bool) -> Vec<(String, Value)> {
    let mut s = ask.clone();
    s["stream"] = json!(true);
    let mut got: Vec<(String, String)> = Vec::new();
    for c in stream(base, "/v1/chat/completions", &s).await {
        for tc in c["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(name) = tc["function"]["name"].as_str() {
                got.push((name.to_string(), String::new()));
            }
            let args = tc["function"]["arguments"].as_str().unwrap();
            let last = got.last_mut().unwrap();
            assert!(!whole || last.1.is_empty() || args.is_empty(), "{tc}");
            last.1 += args;
        }
    }
    (got.into_iter())
        .map(|(n, a)| (n, serde_json::from_str(&a).unwrap()))
        .collect()
}

/// `required` calls asked of `base` under four seeds: each finished choice's calls fit the
/// offered tools, and streamed (each call's arguments whole once it is closed) they are the
/// same calls; at least one choice must finish (a random model may run long in a string).
async fn required_calls_stream_whole(base: &str) {
    required_calls_stream(base, &json!({}), true).await;
}

/// [`required_calls_stream_whole`] with more request fields (`extra`), streamed arguments
/// whole or not; each finished choice's content has no marker left in it.
async fn required_calls_stream(base: &str, extra: &Value, whole: bool) {
    let (mut finished, mut streamed) = (0, 0);
    for seed in 0..4 {
        let mut ask = json!({"model": "tiny", "tools": tools(), "tool_choice": "required",
            "seed": seed, "temperature": 1.0, "max_tokens": 120,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]});
        for (k, v) in extra.as_object().unwrap() {
            ask[k] = v.clone();
        }
        let (s, r) = post(base, "/v1/chat/completions", &ask).await;
        assert_eq!(s, 200, "{r}");
        let want = &r["choices"][0];
        if want["finish_reason"] == "length" {
            continue;
        }
        assert_eq!(want["finish_reason"], "tool_calls", "{want}");
        let calls = fitting_calls(want);
        assert!(!calls.is_empty(), "{want}");
        let content = want["message"]["content"].as_str().unwrap_or_default();
        assert!(
            !content.contains("<|") && !content.contains("<tool_call>"),
            "{want}"
        );
        finished += 1;
        assert_eq!(calls_streamed(base, &ask, whole).await, calls);
        streamed += 1;
    }
    assert!(finished > 0 && streamed > 0, "no choice finished");
}

fn check_calls(choice: &Value, allowed: &[&str]) -> usize {
    check_calls_with(choice, allowed, kiln_id)
}

fn check_calls_with(choice: &Value, allowed: &[&str], id_ok: fn(&str) -> bool) -> usize {
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in &calls {
        let name = c["function"]["name"].as_str().unwrap();
        assert!(allowed.contains(&name), "{choice}");
        assert!(id_ok(c["id"].as_str().unwrap()), "{c}");
        let args: Value =
            serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
        match name {
            "get_weather" => assert!(
                args["city"].as_str().unwrap().chars().count() <= 8,
                "{args}"
            ),
            _ => {
                // JSON Schema's integers include numbers written with a zero fraction (-0.0).
                let int = |v: &Value| v.as_f64().filter(|x| x.fract() == 0.0);
                let (a, b) = (int(&args["a"]).unwrap(), int(&args["b"]).unwrap());
                assert!(
                    (-99.0..=999.0).contains(&a) && (0.0..=9.0).contains(&b),
                    "{args}"
                );
            }
        }
    }
    calls.len()
}

#[tokio::test]
async fn required_and_named_calls_are_valid_in_the_models_format() {
    let ask = |choice: Value, seed: u64| {
        json!({"model": "tiny", "tools": tools(), "tool_choice": choice, "seed": seed, "temperature": 1.0,
            "max_tokens": 200, "n": 2, "messages": [{"role": "user", "content": "Weather in Oslo?"}]})
    };
    let mut finished = [0, 0];
    for seed in 0..3 {
        let (s, r) = post(
            server(),
            "/v1/chat/completions",
            &ask(json!("required"), seed),
        )
        .await;
        assert_eq!(s, 200, "{r}");
        for c in r["choices"].as_array().unwrap() {
            if c["finish_reason"] == "length" {
                continue; // a random model may run long inside a string
            }
            assert_eq!(c["finish_reason"], "tool_calls", "{c}");
            assert!(check_calls(c, &["get_weather", "add"]) >= 1, "{c}");
            finished[0] += 1;
        }
        let named = json!({"type": "function", "function": {"name": "add"}});
        let (s, r) = post(server(), "/v1/chat/completions", &ask(named, seed)).await;
        assert_eq!(s, 200, "{r}");
        for c in r["choices"].as_array().unwrap() {
            if c["finish_reason"] == "length" {
                continue;
            }
            assert_eq!(
                c["finish_reason"], "stop",
                "a named call stops, as OpenAI: {c}"
            );
            assert_eq!(check_calls(c, &["add"]), 1, "{c}");
            finished[1] += 1;
        }
    }
    assert!(
        finished[0] > 0 && finished[1] > 0,
        "no choice finished: {finished:?}"
    );
}

#[tokio::test]
async fn auto_without_a_call_is_content() {
    let body = json!({"model": "tiny", "tools": tools(), "seed": 3, "max_tokens": 24,
        "messages": [{"role": "user", "content": "hi"}]});
    let (s, r) = post(server(), "/v1/chat/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    let c = &r["choices"][0];
    // The random model writes no call: its text is the content.
    assert!(c["message"]["tool_calls"].is_null(), "{c}");
    assert!(c["message"]["content"].is_string(), "{c}");
}

#[tokio::test]
async fn llama3_calls_are_bare_json_with_parameters() {
    let base = tiny_with(LLAMA_TEMPLATE);
    let messages = json!([{"role": "user", "content": "Add 2 and 3."}]);
    let body = json!({"model": "tiny", "tools": tools(), "messages": messages,
        "chat_template_kwargs": {"date_string": "01 Dec 2026"}});
    let text = rendered_by(&base, &body).await;
    assert!(text.contains("Today Date: 01 Dec 2026"), "{text}");
    assert!(
        text.contains("\"parameters\": dictionary of argument name"),
        "{text}"
    );
    assert!(
        text.contains("    \"type\": \"function\",\n    \"function\": {"),
        "tojson(indent=4): {text}"
    );
    let mut finished = 0;
    for seed in 0..3 {
        let ask = json!({"model": "tiny", "tools": tools(), "messages": messages, "seed": seed,
            "temperature": 1.0, "max_tokens": 120, "n": 2,
            "tool_choice": {"type": "function", "function": {"name": "add"}}});
        let (s, r) = post(&base, "/v1/chat/completions", &ask).await;
        assert_eq!(s, 200, "{r}");
        for c in r["choices"].as_array().unwrap() {
            if c["finish_reason"] == "length" {
                continue;
            }
            assert_eq!(check_calls(c, &["add"]), 1, "{c}");
            finished += 1;
        }
    }
    assert!(finished > 0, "no choice finished");
}

#[tokio::test]
async fn streamed_calls_arrive_token_by_token_and_match_the_whole_reply() {
    compare_streamed(server(), kiln_id).await;
}

/// Required calls streamed from `base` against the same request's whole reply.
async fn compare_streamed(base: &str, id_ok: fn(&str) -> bool) {
    let mut compared = 0;
    for seed in 0..4 {
        let body = json!({"model": "tiny", "tools": tools(), "tool_choice": "required", "seed": seed,
            "temperature": 1.0, "max_tokens": 200, "messages": [{"role": "user", "content": "Weather?"}]});
        let (s, whole) = post(base, "/v1/chat/completions", &body).await;
        assert_eq!(s, 200, "{whole}");
        let want = &whole["choices"][0];
        if want["finish_reason"] == "length" {
            continue;
        }
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let chunks = stream(base, "/v1/chat/completions", &streamed).await;
        let (mut calls, mut pieces, mut finish) = (Vec::<(String, String)>::new(), 0, None);
        for c in &chunks {
            let ch = &c["choices"][0];
            for tc in ch["delta"]["tool_calls"].as_array().into_iter().flatten() {
                let i = tc["index"].as_u64().unwrap() as usize;
                if let Some(name) = tc["function"]["name"].as_str() {
                    assert_eq!(i, calls.len(), "calls open in order: {tc}");
                    assert!(id_ok(tc["id"].as_str().unwrap()), "{tc}");
                    calls.push((name.to_string(), String::new()));
                }
                let args = tc["function"]["arguments"].as_str().unwrap();
                pieces += usize::from(!args.is_empty());
                calls[i].1 += args;
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
        assert_eq!(
            finish.as_deref(),
            want["finish_reason"].as_str(),
            "{chunks:?}"
        );
        let whole_calls = want["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), whole_calls.len(), "{chunks:?}");
        for ((name, args), w) in calls.iter().zip(whole_calls) {
            assert_eq!(name, w["function"]["name"].as_str().unwrap());
            let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap();
            assert_eq!(
                parse(args),
                parse(w["function"]["arguments"].as_str().unwrap())
            );
        }
        assert!(
            pieces > calls.len(),
            "arguments came in one piece per call: {chunks:?}"
        );
        compared += 1;
    }
    assert!(compared > 0, "no reply finished");
}
