//! Structural tags through the API: a reply made only of tags holds their begins, contents
//! and ends, whole and streamed, in both request fields; a malformed one is a 400 naming the
//! field, and the server goes on.

use super::*;

/// A format of one `<n>` tag or more, separated by commas, each holding a small object.
fn tags_only(stop_after_first: bool) -> Value {
    json!({"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": ",", "at_least_one": true,
        "stop_after_first": stop_after_first,
        "tags": [{"begin": "<n>", "end": "</n>", "content": {"type": "json_schema", "json_schema": {
            "type": "object", "properties": {"v": {"enum": [1, 2, 3]}},
            "required": ["v"], "additionalProperties": false}}}]}})
}

/// Whether `text` is `<n>{"v": k}</n>` tags joined by commas (one only when `one`).
fn well_formed(text: &str, one: bool) -> bool {
    let tags: Vec<&str> = text.split(',').collect();
    (!one || tags.len() == 1)
        && tags.iter().all(|t| {
            t.strip_prefix("<n>")
                .and_then(|t| t.strip_suffix("</n>"))
                .and_then(|j| serde_json::from_str::<Value>(j).ok())
                .is_some_and(|v| [json!({"v": 1}), json!({"v": 2}), json!({"v": 3})].contains(&v))
        })
}

#[tokio::test]
async fn a_reply_of_tags_holds_their_shape() {
    let base = server();
    for seed in 1..=3 {
        let body = json!({"model": "tiny", "prompt": "list", "max_tokens": 40, "temperature": 1.0,
            "seed": seed, "response_format": tags_only(true)});
        let (s, b) = post(base, "/v1/completions", &body).await;
        assert_eq!(s, 200, "{b}");
        let text = b["choices"][0]["text"].as_str().unwrap();
        assert!(well_formed(text, true), "seed {seed}: {text:?}");
        assert_eq!(b["choices"][0]["finish_reason"], "stop", "{b}");
    }
    // vLLM's field, as JSON text; streamed, the deltas spell the same reply as whole.
    let so = json!({"structural_tag": tags_only(false).to_string()});
    let body = chat(
        "list",
        json!({"max_tokens": 30, "temperature": 1.0, "seed": 4, "structured_outputs": so}),
    );
    let (s, b) = post(base, "/v1/chat/completions", &body).await;
    assert_eq!(s, 200, "{b}");
    let whole = b["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let cut = b["choices"][0]["finish_reason"] == "length";
    // Cut by max_tokens, the last tag may be open: the tags before it hold.
    let done = if cut {
        whole.rsplit_once(',').map_or("", |(d, _)| d)
    } else {
        whole.as_str()
    };
    assert!(
        done.is_empty() && cut || well_formed(done, false),
        "{whole:?}"
    );
    let mut streamed_body = body.clone();
    streamed_body["stream"] = json!(true);
    let streamed: String = stream(base, "/v1/chat/completions", &streamed_body)
        .await
        .iter()
        .map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(streamed, whole);
}

#[tokio::test]
async fn a_malformed_structural_tag_is_refused_by_field() {
    let base = server();
    let rf = json!({"type": "structural_tag", "triggers": ["<f="],
        "structures": [{"begin": "<g>", "schema": {}, "end": "</g>"}]});
    let (s, b) = post(
        base,
        "/v1/chat/completions",
        &chat("hi", json!({"response_format": rf})),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert_eq!(b["error"]["param"], "response_format", "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("starts with none of the triggers"),
        "{b}"
    );
    let bad_regex = json!({"structural_tag": {"format": {"type": "regex", "pattern": "("}}});
    let (s, b) = post(
        base,
        "/v1/chat/completions",
        &chat("hi", json!({"structured_outputs": bad_regex})),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = post(base, "/v1/chat/completions", &chat("hi", json!({}))).await;
    assert_eq!(s, 200, "{b}");
}
