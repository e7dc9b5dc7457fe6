//! `/v1/completions`: token prompts with logprobs and usage, `n` choices, `echo`, stop
//! strings, and the model's generation config for knobs a request leaves unset.

use super::*;

#[tokio::test]
async fn completions_token_prompts_logprobs_and_usage() {
    let base = server();
    let body = json!({"model": "tiny", "prompt": [[10, 20, 30, 40], [50, 60]], "max_tokens": 3, "temperature": 0, "logprobs": 2, "ignore_eos": true});
    let (s, b) = post(base, "/v1/completions", &body).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["object"], "text_completion");
    assert_eq!(b["choices"].as_array().unwrap().len(), 2);
    for c in b["choices"].as_array().unwrap() {
        let lp = &c["logprobs"];
        assert_eq!(lp["tokens"].as_array().unwrap().len(), 3, "{b}");
        assert!(
            lp["token_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x.as_f64().unwrap() <= 0.0)
        );
        assert!(
            lp["top_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m.as_object().unwrap().len() <= 2 && !m.as_object().unwrap().is_empty())
        );
        assert_eq!(c["finish_reason"], "length");
    }
    assert_eq!(b["usage"]["prompt_tokens"], 6);
    assert_eq!(b["usage"]["completion_tokens"], 6);
    assert_eq!(b["usage"]["total_tokens"], 12);

    // n > 1 with sampling: n choices.
    let (s, b) = post(
        base,
        "/v1/chat/completions",
        &chat("hi", json!({"n": 3, "temperature": 1.0, "seed": 5})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["choices"].as_array().unwrap().len(), 3);
}

/// `echo`: each choice's text starts with its prompt (text as sent, token ids decoded), in
/// one body and in the stream's first chunk per choice (with logprobs: `prompt_logprobs.rs`).
#[tokio::test]
async fn completions_echo_the_prompt() {
    let base = server();
    let ids_text = {
        let body = json!({"model": "tiny", "tokens": [10, 20, 30]});
        let (_, t) = post(base, "/detokenize", &body).await;
        t["prompt"].as_str().unwrap().to_string()
    };
    assert!(!ids_text.is_empty());
    for (prompt, texts) in [
        (json!(["the cat", "a dog"]), ["the cat", "a dog"]),
        (json!([[10, 20, 30], [10, 20, 30]]), [&ids_text, &ids_text]),
    ] {
        let plain = json!({"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0, "ignore_eos": true, "n": 2});
        let (s, b) = post(base, "/v1/completions", &plain).await;
        assert_eq!(s, 200, "{b}");
        let mut echo = plain.clone();
        echo["echo"] = json!(true);
        let (s, e) = post(base, "/v1/completions", &echo).await;
        assert_eq!(s, 200, "{e}");
        for i in 0..4 {
            let want = format!(
                "{}{}",
                texts[i / 2],
                b["choices"][i]["text"].as_str().unwrap()
            );
            assert_eq!(e["choices"][i]["text"], want.as_str(), "choice {i}: {e}");
        }
        echo["stream"] = json!(true);
        let chunks = stream(base, "/v1/completions", &echo).await;
        for i in 0..4u64 {
            let text: String = (chunks.iter())
                .flat_map(|c| c["choices"].as_array().cloned().unwrap_or_default())
                .filter(|c| c["index"] == i)
                .filter_map(|c| c["text"].as_str().map(str::to_string))
                .collect();
            let want = e["choices"][i as usize]["text"].as_str().unwrap();
            assert_eq!(text, want, "streamed choice {i}");
        }
    }
}

#[tokio::test]
async fn stop_strings_are_cut_and_never_emitted() {
    let base = server();
    let body = json!({"model": "tiny", "prompt": "the cat sat on", "max_tokens": 24, "temperature": 0, "ignore_eos": true});
    let (_, b) = post(base, "/v1/completions", &body).await;
    let full = b["choices"][0]["text"].as_str().unwrap().to_string();
    let chars: Vec<char> = full.chars().collect();
    assert!(
        chars.len() >= 6,
        "output too short to test stop strings: {full:?}"
    );
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let want = &full[..full.find(&stop).unwrap()];
    let mut with_stop = body.clone();
    with_stop["stop"] = json!([stop, "\u{1}never"]);
    let (_, b) = post(base, "/v1/completions", &with_stop).await;
    assert_eq!(
        b["choices"][0]["text"], want,
        "full {full:?}, stop {stop:?}"
    );
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
    with_stop["stream"] = json!(true);
    let chunks = stream(base, "/v1/completions", &with_stop).await;
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, want);
}

#[tokio::test]
async fn unset_knobs_take_the_model_generation_config() {
    let body = |seed: u64, temperature: Option<f32>| {
        let mut b = json!({"model": "tiny", "prompt": "the cat sat on", "max_tokens": 12, "ignore_eos": true, "seed": seed});
        if let Some(t) = temperature {
            b["temperature"] = json!(t);
        }
        b
    };
    let text = |b: Value| b["choices"][0]["text"].as_str().unwrap().to_string();
    // Without a generation config kiln samples at temperature 1: the seed changes the text.
    let base = server();
    let (a, b) = (
        text(post(base, "/v1/completions", &body(1, None)).await.1),
        text(post(base, "/v1/completions", &body(2, None)).await.1),
    );
    assert_ne!(a, b, "temperature 1 should depend on the seed");
    let greedy = text(post(base, "/v1/completions", &body(1, Some(0.0))).await.1);
    // A model whose generation config says greedy: unset temperature means 0.
    let tc = kiln_model::testing::TinyConfig {
        generation: kiln_model::GenerationDefaults {
            temperature: Some(0.0),
            ..Default::default()
        },
        ..Default::default()
    };
    let base = start_tiny_model(&tc);
    for seed in [1, 2] {
        let (s, b) = post(&base, "/v1/completions", &body(seed, None)).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(text(b), greedy, "seed {seed}");
    }
    // An explicit knob still wins over the model's.
    let (_, explicit) = post(&base, "/v1/completions", &body(2, Some(1.0))).await;
    assert_eq!(text(explicit), b, "same weights, seed and temperature 1");
}
