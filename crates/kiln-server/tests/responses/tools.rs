//! Function calls round the agent loop (the tool's output continuing a stored response), and a
//! reply cut before it reads as calls.

use super::*;

fn tools_server() -> &'static str {
    tools_think_server(false)
}

fn weather() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"enum": ["Oslo", "Bergen"]}},
            "required": ["city"], "additionalProperties": false}})
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
