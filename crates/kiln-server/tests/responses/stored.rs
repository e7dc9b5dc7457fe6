//! Stored responses: continued by `previous_response_id` from the prefix cache, their input
//! items listed a page at a time, fetched and deleted.

use super::*;

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
    let path = format!("/v1/responses/{}", first["id"].as_str().unwrap());
    let (_, del) = delete(server(), &path).await;
    let del: Value = serde_json::from_str(&del).unwrap();
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

/// Stored responses written to `--responses-dir` outlive the server: another server over the
/// same directory continues one, its conversation whole, and fetches and deletes it.
#[tokio::test]
async fn stored_responses_outlive_a_restart_with_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let first_server = start_tiny(|sc, _| sc.responses_dir = Some(path.clone()));
    let first = respond_on(
        &first_server,
        json!({"input": "Name a color.", "max_output_tokens": 6, "temperature": 0}),
    )
    .await;
    let id = first["id"].as_str().unwrap().to_string();
    assert!(dir.path().join(format!("{id}.json")).exists());
    // A second server over the same directory (the first's memory is not shared).
    let second_server = start_tiny(|sc, _| sc.responses_dir = Some(path.clone()));
    let (s, fetched) = get(&second_server, &format!("/v1/responses/{id}")).await;
    let fetched: Value = serde_json::from_str(&fetched).unwrap();
    assert_eq!(s, 200, "{fetched}");
    assert_eq!(fetched["output"], first["output"]);
    let next = respond_on(
        &second_server,
        json!({"input": "Another one?", "max_output_tokens": 6, "temperature": 0, "previous_response_id": id}),
    )
    .await;
    let items = format!(
        "/v1/responses/{}/input_items?order=asc",
        next["id"].as_str().unwrap()
    );
    let (_, list) = get(&second_server, &items).await;
    let list: Value = serde_json::from_str(&list).unwrap();
    let texts: Vec<&str> = (list["data"].as_array().unwrap().iter())
        .map(|i| i["content"][0]["text"].as_str().unwrap())
        .collect();
    let answer = first["output"][0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(texts, ["Name a color.", answer, "Another one?"]);
    // Deleted on one server: gone from the directory, so from a third server too.
    let (s, _) = delete(&second_server, &format!("/v1/responses/{id}")).await;
    assert_eq!(s, 200);
    assert!(!dir.path().join(format!("{id}.json")).exists());
    let third_server = start_tiny(|sc, _| sc.responses_dir = Some(path.clone()));
    let (s, _) = get(&third_server, &format!("/v1/responses/{id}")).await;
    assert_eq!(s, 404);
}
