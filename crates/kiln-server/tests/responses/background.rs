//! Background responses: polled to the reply a foreground response gives, a stream picked up
//! again after its connection was dropped, cancelled (its sequence aborted), deleted while
//! running, and what is refused.

use std::time::{Duration, Instant};

use super::*;

/// A server of its own (the tiny model's template, responses kept), so its running-request
/// gauge counts only this file's requests.
fn own_server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|_, _| {}))
}

/// The response `id` as it stands.
async fn fetch(base: &str, id: &Value) -> Value {
    let (s, body) = get(base, &format!("/v1/responses/{}", id.as_str().unwrap())).await;
    assert_eq!(s, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Polls `id` until it has ended.
async fn ended(base: &str, id: &Value) -> Value {
    let start = Instant::now();
    loop {
        let r = fetch(base, id).await;
        match r["status"].as_str().unwrap() {
            "queued" | "in_progress" => {}
            _ => return r,
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "never ended: {r}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SSE text as events, each named by its `type`.
fn parse_events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(typed_event)
        .collect()
}

async fn cancel(base: &str, id: &Value) -> (u16, Value) {
    let path = format!("/v1/responses/{}/cancel", id.as_str().unwrap());
    post(base, &path, &json!({})).await
}

/// The answer's text, from the `output_text` deltas of `events`.
fn delta_text(events: &[Value]) -> String {
    (events.iter())
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_background_response_is_polled_to_the_reply_a_foreground_one_gives() {
    let ask = json!({"instructions": INSTRUCTIONS, "input": "Name three colors.", "max_output_tokens": 12, "temperature": 0});
    let fore = respond(ask.clone()).await;
    assert_eq!(fore["background"], false);
    let mut body = ask.clone();
    body["background"] = json!(true);
    let back = respond(body).await;
    assert_eq!(back["status"], "queued", "{back}");
    assert_eq!(
        (&back["background"], &back["output"]),
        (&json!(true), &json!([]))
    );
    let done = ended(server(), &back["id"]).await;
    assert_eq!(done["status"], fore["status"], "{done}");
    assert_eq!(without_ids(&done["output"]), without_ids(&fore["output"]));
    for k in ["input_tokens", "output_tokens"] {
        assert_eq!(done["usage"][k], fore["usage"][k]);
    }
    // It is continued like any stored response, and cancelling it now changes nothing.
    let (s, again) = cancel(server(), &back["id"]).await;
    assert_eq!((s, &again), (200, &done));
    // (ignore_eos: sampled at the default temperature, a reply could otherwise end at once.)
    let next = respond(
        json!({"input": "And one more?", "max_output_tokens": 2, "ignore_eos": true,
        "previous_response_id": back["id"]}),
    )
    .await;
    assert_eq!(next["status"], "incomplete", "{next}");
}

#[tokio::test]
async fn a_background_stream_is_picked_up_after_its_connection_is_dropped() {
    let body = json!({"input": "Count to twenty.", "max_output_tokens": 48, "temperature": 0,
        "ignore_eos": true, "background": true, "stream": true});
    let mut r = send(server(), "/v1/responses", &body).await;
    assert_eq!(r.status().as_u16(), 200);
    // Read until the first delta, then drop the connection.
    let mut text = String::new();
    while !text.contains("response.output_text.delta") {
        let chunk = r.chunk().await.unwrap().expect("the stream ended early");
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    drop(r);
    // The events read whole (a chunk may end inside one).
    let mut seen = parse_events(&text[..text.rfind("\n\n").unwrap() + 2]);
    assert_eq!(seen[0]["type"], "response.created");
    assert_eq!(seen[0]["response"]["status"], "queued");
    let id = seen[0]["response"]["id"].clone();
    let last = seen.last().unwrap()["sequence_number"].as_u64().unwrap();

    // Picked up after the last event read: the rest, numbered on, to the end.
    let path = format!(
        "/v1/responses/{}?stream=true&starting_after={last}",
        id.as_str().unwrap()
    );
    let (s, rest) = get(server(), &path).await;
    assert_eq!(s, 200, "{rest}");
    let rest = parse_events(&rest);
    assert_eq!(
        rest.last().unwrap()["type"],
        "response.incomplete",
        "cut at 48 tokens"
    );
    seen.extend(rest);
    for (i, e) in seen.iter().enumerate() {
        assert_eq!(e["sequence_number"], i, "{e}");
    }
    let done = fetch(server(), &id).await;
    assert_eq!(
        done["usage"]["output_tokens"], 48,
        "generation went on without a reader"
    );
    let answer = done["output"][0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(delta_text(&seen), answer);

    // From the start, the same events.
    let (_, all) = get(
        server(),
        &format!("/v1/responses/{}?stream=true", id.as_str().unwrap()),
    )
    .await;
    assert_eq!(parse_events(&all), seen);
}

#[tokio::test]
async fn a_cancelled_background_response_stops_and_frees_its_sequence() {
    let base = own_server();
    let long = json!({"input": "Write a long story.", "max_output_tokens": 400, "ignore_eos": true, "background": true});
    let r = respond_on(base, long.clone()).await;
    let (s, cancelled) = cancel(base, &r["id"]).await;
    assert_eq!(s, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(fetch(base, &r["id"]).await, cancelled);
    assert_eq!(
        cancel(base, &r["id"]).await.1,
        cancelled,
        "cancelling again"
    );
    // Its stream, picked up, ends.
    let (s, events) = get(
        base,
        &format!("/v1/responses/{}?stream=true", r["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(parse_events(&events)[0]["type"], "response.created");

    // Deleted while running: cancelled, then gone.
    let r = respond_on(base, long).await;
    let path = format!("/v1/responses/{}", r["id"].as_str().unwrap());
    assert_eq!(delete(base, &path).await.0, 200);
    assert_eq!(get(base, &path).await.0, 404);

    // Neither goes on running.
    let start = Instant::now();
    loop {
        let m = get_text(base, "/metrics").await;
        let busy =
            metric(&m, "kiln_num_requests_running") + metric(&m, "kiln_num_requests_waiting");
        if busy == 0.0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still running: {busy}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn what_background_mode_refuses() {
    let base = own_server();
    let refused = |base: &'static str, path: String, body: Value| async move {
        let (s, r) = post(base, &path, &body).await;
        (
            s,
            r["error"]["param"].as_str().unwrap_or_default().to_string(),
        )
    };
    let create = "/v1/responses".to_string();
    let bg = |extra: Value| {
        let mut b = json!({"input": "Hi", "max_output_tokens": 2, "background": true});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    assert_eq!(
        refused(base, create.clone(), bg(json!({"store": false}))).await,
        (400, "store".into())
    );
    assert_eq!(
        refused(plain_server(), create.clone(), bg(json!({}))).await,
        (400, "background".into())
    );

    // Continuing one still running is refused; cancelling a foreground one too.
    let running = respond_on(
        base,
        bg(json!({"max_output_tokens": 400, "ignore_eos": true})),
    )
    .await;
    let cont = bg(json!({"previous_response_id": running["id"]}));
    assert_eq!(
        refused(base, create, cont).await,
        (400, "previous_response_id".into())
    );
    cancel(base, &running["id"]).await;
    let fore = respond_on(base, json!({"input": "Hi", "max_output_tokens": 2})).await;
    assert_eq!(cancel(base, &fore["id"]).await.0, 400);
    assert_eq!(cancel(base, &json!("resp_none")).await.0, 404);

    let id = fore["id"].as_str().unwrap();
    for (query, param) in [
        ("?stream=true", "stream"),
        ("?starting_after=2", "starting_after"),
        ("?stream=maybe", "stream"),
        ("?include=x", "include"),
    ] {
        let (s, body) = get(base, &format!("/v1/responses/{id}{query}")).await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (s, body["error"]["param"].as_str()),
            (400, Some(param)),
            "{query}: {body}"
        );
    }
}
