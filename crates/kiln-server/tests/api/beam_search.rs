//! Beam search (`use_beam_search`): one beam is the greedy reply, with its summed
//! log-probability; more beams are distinct replies ranked by score; chat gets them as
//! messages; what beam search does not serve is refused by name.

use super::*;

fn completion(extra: Value) -> Value {
    let mut b = json!({"model": "tiny", "prompt": "the cat", "max_tokens": 5, "temperature": 0, "ignore_eos": true});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

#[tokio::test]
async fn one_beam_is_the_greedy_reply_and_more_are_ranked() {
    let base = server();
    let (s, greedy) = post(base, "/v1/completions", &completion(json!({"logprobs": 0}))).await;
    assert_eq!(s, 200, "{greedy}");
    let greedy_text = greedy["choices"][0]["text"].as_str().unwrap();
    let greedy_sum: f64 = (greedy["choices"][0]["logprobs"]["token_logprobs"]
        .as_array()
        .unwrap())
    .iter()
    .map(|v| v.as_f64().unwrap())
    .sum();

    let beam = |n: u32, length_penalty: f64| {
        completion(json!({"use_beam_search": true, "n": n, "length_penalty": length_penalty}))
    };
    let (s, one) = post(base, "/v1/completions", &beam(1, 0.0)).await;
    assert_eq!(s, 200, "{one}");
    assert_eq!(one["choices"][0]["text"], greedy_text, "{one}");
    let cum = one["choices"][0]["cumulative_logprob"].as_f64().unwrap();
    assert!(
        (cum - greedy_sum).abs() < 1e-3,
        "{cum} against {greedy_sum}"
    );
    assert_eq!(one["usage"]["completion_tokens"], 5);

    let (s, three) = post(base, "/v1/completions", &beam(3, 0.0)).await;
    assert_eq!(s, 200, "{three}");
    let choices = three["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3, "{three}");
    let texts: Vec<&str> = choices
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert!(
        texts[0] != texts[1] && texts[1] != texts[2] && texts[0] != texts[2],
        "{texts:?}"
    );
    let cums: Vec<f64> = choices
        .iter()
        .map(|c| c["cumulative_logprob"].as_f64().unwrap())
        .collect();
    assert!(
        cums.windows(2).all(|w| w[0] >= w[1]),
        "ranked by their sum: {cums:?}"
    );

    // Chat: the beams as messages.
    let (s, c) = post(
        base,
        "/v1/chat/completions",
        &chat(
            "hi",
            json!({"use_beam_search": true, "n": 2, "max_tokens": 4}),
        ),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    let msgs = c["choices"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{c}");
    assert!(
        msgs.iter()
            .all(|m| m["message"]["role"] == "assistant" && m["message"]["content"].is_string())
    );
}

#[tokio::test]
async fn what_beam_search_does_not_serve_is_refused() {
    let base = server();
    for (extra, param) in [
        (json!({"use_beam_search": true, "stream": true}), "stream"),
        (json!({"use_beam_search": true, "n": 11}), "n"),
        (json!({"use_beam_search": true, "top_p": 0.5}), "top_p"),
        (json!({"use_beam_search": true, "logprobs": 2}), "logprobs"),
        (json!({"use_beam_search": true, "seed": 3}), "seed"),
        (json!({"length_penalty": 0.5}), "length_penalty"),
    ] {
        let (s, r) = post(base, "/v1/completions", &completion(extra.clone())).await;
        assert_eq!(s, 400, "{extra}: {r}");
        assert_eq!(r["error"]["param"], param, "{extra}: {r}");
    }
}
