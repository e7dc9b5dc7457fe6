//! A response's message and reasoning items hold the chat reply, and its stream adds up to
//! the whole response.

use super::*;

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

/// `include: ["message.output_text.logprobs"]` gives the answer's tokens the log-probabilities
/// chat gives the same greedy reply, alternatives included, whole and streamed.
#[tokio::test]
async fn included_logprobs_are_the_chat_replys() {
    let chat = json!({"model": "tiny", "max_tokens": 10, "temperature": 0, "logprobs": true, "top_logprobs": 2,
        "messages": [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Hi there"}]});
    let (s, c) = post(server(), "/v1/chat/completions", &chat).await;
    assert_eq!(s, 200, "{c}");
    let want = c["choices"][0]["logprobs"]["content"].as_array().unwrap();
    let body = json!({"model": "tiny", "instructions": INSTRUCTIONS, "input": "Hi there",
        "max_output_tokens": 10, "temperature": 0, "store": false,
        "include": ["message.output_text.logprobs"], "top_logprobs": 2});
    let r = respond(body.clone()).await;
    let part = &r["output"][0]["content"][0];
    let got = part["logprobs"].as_array().unwrap();
    // Every token wrote text but perhaps a last end-of-sequence token.
    assert!(got.len() + 1 >= want.len() && !got.is_empty(), "{r}\n{c}");
    assert_eq!(got[..], want[..got.len()], "{r}\n{c}");
    assert!(
        got.iter()
            .all(|e| e["top_logprobs"].as_array().unwrap().len() == 2)
    );
    let text: String = got.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert!(
        part["text"].as_str().unwrap().starts_with(text.trim_end()),
        "{r}"
    );

    let mut streamed = body;
    streamed["stream"] = json!(true);
    let evs = events(server(), streamed).await;
    let deltas: Vec<Value> = (evs.iter())
        .filter(|e| e["type"] == "response.output_text.delta")
        .flat_map(|e| e["logprobs"].as_array().unwrap().clone())
        .collect();
    assert_eq!(deltas[..], got[..]);
    let last = &evs.last().unwrap()["response"];
    assert_eq!(
        last["output"][0]["content"][0]["logprobs"],
        part["logprobs"]
    );
    // Not asked for: the part's list is empty, as OpenAI writes it.
    let plain =
        json!({"input": "Hi there", "max_output_tokens": 3, "temperature": 0, "store": false});
    let plain = respond(plain).await;
    assert_eq!(plain["output"][0]["content"][0]["logprobs"], json!([]));
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
    // The same tokens as chat counts; cut inside the block, every token wrote reasoning.
    let reasoning = &r["usage"]["output_tokens_details"]["reasoning_tokens"];
    assert_eq!(
        *reasoning, c["usage"]["completion_tokens_details"]["reasoning_tokens"],
        "{r}\n{c}"
    );
    if r["output"].as_array().unwrap().len() == 1 {
        assert_eq!(*reasoning, r["usage"]["output_tokens"], "{r}");
    }
    assert!(reasoning.as_u64() > Some(0), "{r}");
}
