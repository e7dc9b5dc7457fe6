//! Speculative decoding through the server: a server whose decodes carry guesses of their
//! next tokens answers every request as one without them does (greedy and seeded, with
//! penalties, streamed and not, cut by stop strings that end inside a run of confirmed guesses), and reports its
//! guesses in the metrics.

mod common;

use common::*;
use kiln_engine::Speculation;
use serde_json::{Value, json};

/// The text, finish reason and completion tokens of a completion, streamed or not.
async fn complete(base: &str, body: &Value) -> (String, String, u64) {
    if body["stream"] == json!(true) {
        let chunks = stream(base, "/v1/completions", body).await;
        let text = (chunks.iter())
            .filter_map(|c| c["choices"].get(0)?["text"].as_str().map(str::to_string))
            .collect();
        let finish = (chunks.iter())
            .find_map(|c| {
                c["choices"].get(0)?["finish_reason"]
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap();
        let usage = chunks
            .iter()
            .rev()
            .find_map(|c| c["usage"].as_object().cloned());
        let tokens = usage.map_or(0, |u| u["completion_tokens"].as_u64().unwrap());
        return (text, finish, tokens);
    }
    let (s, r) = post(base, "/v1/completions", body).await;
    assert_eq!(s, 200, "{r}");
    let c = &r["choices"][0];
    (
        c["text"].as_str().unwrap().to_string(),
        c["finish_reason"].as_str().unwrap().to_string(),
        r["usage"]["completion_tokens"].as_u64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn guesses_change_no_reply() {
    let plain = start_tiny(|_, _| {});
    let guessing = start_tiny(|_, ec| {
        ec.speculation = Some(Speculation {
            num_tokens: 4,
            lookup_min: 1,
            lookup_max: 3,
        })
    });
    let prompts = [
        "the cat sat on the mat, the cat sat on the mat, the cat",
        "one two three one two three one two",
        "hello world",
    ];
    let mut cut_by_stop = 0;
    for prompt in prompts {
        // Greedy, seeded, and greedy with penalties (each guess's row counting the guesses
        // before it).
        for (temperature, seed, penalty) in [(0.0, 0, 0.0), (0.8, 7, 0.0), (0.0, 0, 0.05)] {
            let body = json!({"model": "tiny", "prompt": prompt, "max_tokens": 40,
                "temperature": temperature, "seed": seed, "ignore_eos": true,
                "repetition_penalty": 1.0 + penalty, "frequency_penalty": penalty,
                "stream_options": {"include_usage": true}});
            let want = complete(&plain, &body).await;
            // A stop string from the middle of the reply: it ends the reply there, with
            // whatever guesses the same step confirmed after it dropped.
            let mid = want
                .0
                .char_indices()
                .map(|(i, _)| i)
                .nth(want.0.chars().count() / 2);
            let stop = mid.map(|i| want.0[i..].chars().take(3).collect::<String>());
            for stream in [false, true] {
                let mut body = body.clone();
                body["stream"] = json!(stream);
                let what =
                    format!("{prompt:?} at {temperature}, penalty {penalty}, streamed: {stream}");
                assert_eq!(complete(&guessing, &body).await, want, "{what}");
                if let Some(stop) = stop.as_ref().filter(|s| !s.trim().is_empty()) {
                    body["stop"] = json!([stop]);
                    let cut = complete(&plain, &body).await;
                    assert_eq!(
                        complete(&guessing, &body).await,
                        cut,
                        "{what}, stop {stop:?}"
                    );
                    cut_by_stop += usize::from(cut.1 == "stop");
                }
            }
        }
    }
    assert!(cut_by_stop > 0, "no reply was cut by its stop string");
    let text = get_text(&guessing, "/metrics").await;
    let made = metric(&text, "kiln_spec_decode_num_draft_tokens_total");
    let confirmed = metric(&text, "kiln_spec_decode_num_accepted_tokens_total");
    assert!(
        confirmed > 0.0 && confirmed <= made,
        "{confirmed} of {made}"
    );
    let text = get_text(&plain, "/metrics").await;
    assert_eq!(
        metric(&text, "kiln_spec_decode_num_draft_tokens_total"),
        0.0
    );
}
