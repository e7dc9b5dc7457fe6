//! `/v1/responses` against `/v1/chat/completions` on the tiny random model: a response holds
//! the chat reply as items (greedy, so both sample the same tokens), streamed events add up to
//! the whole response, a stored response is continued by `previous_response_id` with the
//! prompt the whole conversation renders to (and the prefix cache hit), function calls and
//! their outputs go round the loop an agent runs, and what kiln does not serve is refused.

mod common;

use std::sync::OnceLock;

use common::*;
use serde_json::{Value, json};

const INSTRUCTIONS: &str = "You are a careful assistant. Answer in one short sentence, and call a tool when the answer needs one.";

fn server() -> &'static str {
    tools_think_server(true)
}

fn tools_server() -> &'static str {
    tools_think_server(false)
}

fn weather() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"enum": ["Oslo", "Bergen"]}},
            "required": ["city"], "additionalProperties": false}})
}

/// The tiny model's own template (no tools: the generic format), keeping no responses.
fn plain_server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|sc, _| sc.responses_store = 0))
}

async fn respond(body: Value) -> Value {
    respond_on(server(), body).await
}

async fn respond_on(base: &str, body: Value) -> Value {
    let (s, r) = post(base, "/v1/responses", &body).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["object"], "response", "{r}");
    r
}

/// The ids a chat body renders to.
async fn rendered(base: &str, body: Value) -> Vec<u64> {
    let (s, r) = post(base, "/v1/chat/completions/render", &body).await;
    assert_eq!(s, 200, "{r}");
    r["token_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

/// A streamed response's events, each checked to be named by its `type`.
async fn events(base: &str, body: Value) -> Vec<Value> {
    let (status, raw) = stream_raw(base, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{raw:?}");
    let mut out = Vec::new();
    for ev in raw {
        let (name, data) = ev
            .strip_prefix("event: ")
            .and_then(|e| e.split_once("\ndata: "))
            .unwrap_or_else(|| panic!("bad SSE event {ev:?}"));
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["type"], name, "{ev}");
        assert_eq!(v["sequence_number"], out.len(), "{ev}");
        out.push(v);
    }
    out
}

/// Each item without its generated ids.
fn without_ids(output: &Value) -> Vec<Value> {
    let mut items = output.as_array().unwrap().clone();
    for i in &mut items {
        let o = i.as_object_mut().unwrap();
        o.remove("id");
        o.remove("call_id");
    }
    items
}

#[tokio::test]
async fn a_response_holds_the_chat_reply_and_streams_the_same() {
    let chat = json!({"model": "tiny", "max_tokens": 10, "temperature": 0,
        "messages": [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Hi there"}]});
    let (s, c) = post(server(), "/v1/chat/completions", &chat).await;
    assert_eq!(s, 200, "{c}");
    let body = json!({"model": "tiny", "instructions": INSTRUCTIONS, "input": "Hi there",
        "max_output_tokens": 10, "temperature": 0, "store": false, "metadata": {"run": "7"}});
    let r = respond(body.clone()).await;
    let item = &r["output"][0];
    assert_eq!(
        (item["type"].as_str(), item["role"].as_str()),
        (Some("message"), Some("assistant")),
        "{r}"
    );
    assert_eq!(item["content"][0]["type"], "output_text");
    assert_eq!(
        item["content"][0]["text"], c["choices"][0]["message"]["content"],
        "{r}\n{c}"
    );
    assert_eq!(r["usage"]["input_tokens"], c["usage"]["prompt_tokens"]);
    assert_eq!(r["usage"]["output_tokens"], c["usage"]["completion_tokens"]);
    assert_eq!(r["metadata"], json!({"run": "7"}));
    let cut = c["choices"][0]["finish_reason"] == "length";
    let status = if cut { "incomplete" } else { "completed" };
    assert_eq!(
        (r["status"].as_str(), item["status"].as_str()),
        (Some(status), Some(status))
    );
    if cut {
        assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
    }

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let evs = events(server(), streamed).await;
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        &kinds[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(kinds.last(), Some(&format!("response.{status}").as_str()));
    let deltas: String = evs
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, item["content"][0]["text"].as_str().unwrap());
    let last = &evs.last().unwrap()["response"];
    assert_eq!(without_ids(&last["output"]), without_ids(&r["output"]));
    assert_eq!(last["usage"], r["usage"]);
}

#[tokio::test]
async fn a_stored_response_is_continued_from_the_prefix_cache() {
    let first = respond(json!({"instructions": INSTRUCTIONS, "input": "Name a color.", "max_output_tokens": 6, "temperature": 0})).await;
    assert_eq!(first["store"], true);
    let answer = first["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let second = respond(
        json!({"instructions": INSTRUCTIONS, "input": "Another one?", "max_output_tokens": 6,
        "temperature": 0, "previous_response_id": first["id"]}),
    )
    .await;
    assert_eq!(second["previous_response_id"], first["id"]);
    let conversation = json!([{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": answer}, {"role": "user", "content": "Another one?"}]);
    let ids = rendered(server(), json!({"messages": conversation})).await;
    assert_eq!(second["usage"]["input_tokens"], ids.len(), "{second}");
    let cached = second["usage"]["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        cached >= 16,
        "the first turn's blocks are found again: {second}"
    );

    // The items it was generated from, newest first unless asked, a page at a time.
    let path = format!(
        "/v1/responses/{}/input_items",
        second["id"].as_str().unwrap()
    );
    let list = |query: &str| {
        let path = format!("{path}{query}");
        async move {
            let (s, body) = get(server(), &path).await;
            (s, serde_json::from_str::<Value>(&body).unwrap())
        }
    };
    let (s, all) = list("?order=asc").await;
    assert_eq!(s, 200, "{all}");
    let texts: Vec<&str> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Name a color.", answer.as_str(), "Another one?"]);
    assert!(
        all["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["id"].is_string())
    );
    let (_, page) = list("?limit=2").await;
    assert_eq!(
        (
            page["data"][0]["content"][0]["text"].as_str(),
            page["has_more"].as_bool()
        ),
        (Some("Another one?"), Some(true))
    );
    let (_, rest) = list(&format!(
        "?limit=2&after={}",
        page["last_id"].as_str().unwrap()
    ))
    .await;
    assert_eq!(
        (
            rest["data"][0]["content"][0]["text"].as_str(),
            rest["has_more"].as_bool()
        ),
        (Some("Name a color."), Some(false))
    );
    assert_eq!(list("?limit=0").await.1["error"]["param"], "limit");
    assert_eq!(list("?before=x").await.1["error"]["param"], "before");

    // Stored as answered; deleting the first leaves the chain whole.
    let (s, got) = get(
        server(),
        &format!("/v1/responses/{}", first["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (s, serde_json::from_str::<Value>(&got).unwrap()),
        (200, first.clone())
    );
    let url = format!(
        "{}/v1/responses/{}",
        server(),
        first["id"].as_str().unwrap()
    );
    let del: Value = client()
        .delete(&url)
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        del,
        json!({"id": first["id"], "object": "response.deleted", "deleted": true})
    );
    let (s, _) = get(
        server(),
        &format!("/v1/responses/{}", first["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(s, 404);
    let third = respond(
        json!({"instructions": INSTRUCTIONS, "input": "Thanks.", "max_output_tokens": 2,
        "previous_response_id": second["id"]}),
    )
    .await;
    assert!(third["usage"]["input_tokens"].as_u64() > second["usage"]["input_tokens"].as_u64());
    let (s, e) = post(
        server(),
        "/v1/responses",
        &json!({"input": "x", "previous_response_id": first["id"]}),
    )
    .await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (404, Some("previous_response_id")),
        "{e}"
    );
}

#[tokio::test]
async fn function_calls_go_round_the_agent_loop() {
    // On a server that does not split reasoning the grammar holds from the first token (the
    // random model would otherwise open a `<think>` block and stay in it).
    let base = tools_server();
    // A random model may write whitespace inside the call's JSON until cut: the first seed
    // whose reply finishes.
    let mut cut = Vec::new();
    let (body, r) = loop {
        let body = json!({"input": "Weather in Oslo?", "tools": [weather()], "tool_choice": "required",
            "parallel_tool_calls": false, "max_output_tokens": 200, "seed": cut.len(), "temperature": 1.0});
        let r = respond_on(base, body.clone()).await;
        if r["status"] == "completed" {
            break (body, r);
        }
        assert_eq!(r["output"][0]["status"], "incomplete", "{r}");
        cut.push(r);
        assert!(cut.len() < 6, "no reply finished: {cut:?}");
    };
    let calls: Vec<&Value> = r["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .collect();
    assert_eq!(calls.len(), 1, "{r}");
    let call = calls[0];
    assert_eq!(call["name"], "get_weather");
    let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert!(args["city"].is_string(), "{args}");

    // Streamed with the same seed: the same items, the arguments sent as deltas.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let evs = events(base, streamed).await;
    let last = &evs.last().unwrap()["response"];
    assert_eq!(without_ids(&last["output"]), without_ids(&r["output"]));
    let args_streamed: String = evs
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(args_streamed, call["arguments"].as_str().unwrap());

    // The tool's answer continues the stored response: the prompt is the chat API's for the
    // same conversation.
    let next = respond_on(base, json!({"previous_response_id": r["id"], "tools": [weather()], "max_output_tokens": 4,
        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "Rain, 7 C"}]})).await;
    let chat_tool = json!({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
        "parameters": weather()["parameters"]}});
    let ids = rendered(base, json!({"tools": [chat_tool], "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": call["call_id"], "type": "function",
            "function": {"name": "get_weather", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": "Rain, 7 C"}]})).await;
    assert_eq!(next["usage"]["input_tokens"], ids.len(), "{next}");
    // An output for a call that was never made is refused.
    let (s, e) = post(
        base,
        "/v1/responses",
        &json!({"previous_response_id": r["id"],
        "input": [{"type": "function_call_output", "call_id": "call_nope", "output": "x"}]}),
    )
    .await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("input")),
        "{e}"
    );
}

#[tokio::test]
async fn reasoning_comes_first_as_its_own_item() {
    let chat = json!({"max_tokens": 8, "temperature": 0, "chat_template_kwargs": {"enable_thinking": true},
        "messages": [{"role": "user", "content": "Why?"}]});
    let (s, c) = post(server(), "/v1/chat/completions", &chat).await;
    assert_eq!(s, 200, "{c}");
    let r = respond(
        json!({"input": "Why?", "max_output_tokens": 8, "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": true}}),
    )
    .await;
    let item = &r["output"][0];
    assert_eq!(item["type"], "reasoning", "{r}");
    assert_eq!(
        item["content"][0]["text"], c["choices"][0]["message"]["reasoning_content"],
        "{r}\n{c}"
    );
    assert!(
        r["usage"]["output_tokens_details"]["reasoning_tokens"].as_u64() > Some(0),
        "{r}"
    );
}

#[tokio::test]
async fn what_is_not_served_is_refused_by_name() {
    for (body, status, param) in [
        (json!({"input": "x", "n": 2}), 400, "n"),
        (
            json!({"input": "x", "tools": [{"type": "web_search"}]}),
            400,
            "tools",
        ),
        (
            json!({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}),
            400,
            "text.format",
        ),
        (
            json!({"input": [{"type": "item_reference", "id": "msg_1"}]}),
            400,
            "input",
        ),
        (
            json!({"input": "x", "max_output_tokens": 1_000_000}),
            400,
            "max_output_tokens",
        ),
        (
            json!({"input": "x", "include": ["message.output_text.logprobs"]}),
            400,
            "include",
        ),
        (
            json!({"input": "x", "top_logprobs": 2}),
            400,
            "top_logprobs",
        ),
        (
            json!({"input": "x", "previous_response_id": "resp_none"}),
            404,
            "previous_response_id",
        ),
    ] {
        let (s, e) = post(server(), "/v1/responses", &body).await;
        assert_eq!(
            (s, e["error"]["param"].as_str()),
            (status, Some(param)),
            "{body}: {e}"
        );
    }
    let (s, _) = get(server(), "/v1/responses/resp_none").await;
    assert_eq!(s, 404);
    // A server that keeps no responses answers without storing, and refuses `store: true`.
    let off = plain_server();
    let (s, r) = post(
        off,
        "/v1/responses",
        &json!({"input": "x", "max_output_tokens": 2}),
    )
    .await;
    assert_eq!((s, r["store"].as_bool()), (200, Some(false)), "{r}");
    let (s, _) = get(off, &format!("/v1/responses/{}", r["id"].as_str().unwrap())).await;
    assert_eq!(s, 404);
    let (s, e) = post(off, "/v1/responses", &json!({"input": "x", "store": true})).await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("store")),
        "{e}"
    );
}

#[tokio::test]
async fn a_reply_cut_before_it_reads_as_calls_is_given_as_written() {
    let body = json!({"input": "Weather?", "tools": [weather()], "max_output_tokens": 3, "temperature": 0, "store": false});
    let r = respond_on(plain_server(), body.clone()).await;
    assert_eq!(r["status"], "incomplete", "{r}");
    let text = r["output"][0]["content"][0]["text"].as_str().unwrap();
    // The generic format's reply object, cut.
    assert!(text.starts_with('{'), "{r}");
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let evs = events(plain_server(), streamed).await;
    assert_eq!(
        without_ids(&evs.last().unwrap()["response"]["output"]),
        without_ids(&r["output"])
    );
}

#[tokio::test]
async fn a_failed_step_ends_the_stream_with_the_error() {
    // One request alone: step 1 is its prefill, steps 2.. its decodes.
    let srv = start_tiny_faulty(
        |_, _| {},
        |_| kiln_engine::FaultPlan {
            fail_steps: vec![3],
            ..Default::default()
        },
    );
    let body = json!({"input": "Hi", "max_output_tokens": 6, "temperature": 0, "stream": true});
    let evs = events(&srv.base, body).await;
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["error", "response.failed"],
        "{evs:?}"
    );
    let error = &evs[evs.len() - 2];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("injected failure of step 3"),
        "{error}"
    );
    let failed = &evs.last().unwrap()["response"];
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["status"] == "incomplete"),
        "{failed}"
    );
    // Not kept, and the server goes on.
    let id = evs[0]["response"]["id"].as_str().unwrap();
    assert_eq!(get(&srv.base, &format!("/v1/responses/{id}")).await.0, 404);
    let (s, r) = post(
        &srv.base,
        "/v1/responses",
        &json!({"input": "Hi", "max_output_tokens": 6}),
    )
    .await;
    assert_eq!(
        (s, r["usage"]["output_tokens"].as_u64()),
        (200, Some(6)),
        "{r}"
    );
}
