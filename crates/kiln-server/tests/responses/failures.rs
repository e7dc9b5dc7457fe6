//! What kiln does not serve is refused by name, and a step that fails ends the stream with
//! the error.

use super::*;

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
            json!({"input": "x", "include": ["reasoning.encrypted_content"]}),
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
    // (Sampled without a seed: the random model may end the reply early.)
    let written = r["usage"]["output_tokens"].as_u64().unwrap_or(0);
    assert!(s == 200 && (1..=6).contains(&written), "{r}");
}

#[tokio::test]
async fn a_failed_step_leaves_a_background_response_failed() {
    let srv = start_tiny_faulty(
        |_, _| {},
        |_| kiln_engine::FaultPlan {
            fail_steps: vec![2],
            ..Default::default()
        },
    );
    let body =
        json!({"input": "Hi", "max_output_tokens": 6, "ignore_eos": true, "background": true});
    let (s, r) = post(&srv.base, "/v1/responses", &body).await;
    assert_eq!((s, &r["status"]), (200, &json!("queued")), "{r}");
    let path = format!("/v1/responses/{}", r["id"].as_str().unwrap());
    let failed = loop {
        let (s, body) = get(&srv.base, &path).await;
        assert_eq!(s, 200, "{body}");
        let r: Value = serde_json::from_str(&body).unwrap();
        if !["queued", "in_progress"].contains(&r["status"].as_str().unwrap()) {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("injected failure of step 2"), "{failed}");
    // Fetched, not continued.
    let next = json!({"input": "Go on", "previous_response_id": r["id"]});
    let (s, e) = post(&srv.base, "/v1/responses", &next).await;
    assert_eq!(
        (s, e["error"]["param"].as_str()),
        (400, Some("previous_response_id")),
        "{e}"
    );
}
