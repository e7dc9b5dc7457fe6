//! vLLM's request fields on the tiny model, through the GPU sampler: `stop_token_ids` end a
//! reply as end-of-sequence does, `min_tokens` holds end-of-sequence and stop tokens (and
//! stop strings) off for its first tokens, `include_stop_str_in_output` keeps the stop
//! string, `priority` is taken only with priority scheduling, `truncate_prompt_tokens` keeps a
//! prompt's last tokens; `allowed_token_ids` and `bad_words` keep tokens from being sampled;
//! `stream_options.continuous_usage_stats` puts each choice's usage so far on every chunk;
//! bad values are refused naming the field.

mod common;

use std::sync::OnceLock;

use common::*;
use kiln_model::testing::tiny_tokenizer::eos_id;
use serde_json::{Value, json};

fn server() -> &'static str {
    static BASE: OnceLock<String> = OnceLock::new();
    BASE.get_or_init(|| start_tiny(|_, _| {}))
}

/// A greedy completion of "the cat sat" with `extra` fields: its text, token ids and
/// finish reason.
async fn complete(extra: Value) -> (String, Vec<u64>, String) {
    let mut body = json!({"model": "tiny", "prompt": "the cat sat", "max_tokens": 12,
        "temperature": 0.0, "logprobs": 0, "return_tokens_as_token_ids": true});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let (s, r) = post(server(), "/v1/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    let c = &r["choices"][0];
    let ids = (c["logprobs"]["tokens"].as_array().unwrap().iter())
        .map(|t| {
            let t = t.as_str().unwrap();
            t.strip_prefix("token_id:").unwrap().parse().unwrap()
        })
        .collect();
    let text = c["text"].as_str().unwrap().to_string();
    (text, ids, c["finish_reason"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn stop_token_ids_and_min_tokens() {
    let (plain, ids, _) = complete(json!({"ignore_eos": true})).await;
    assert_eq!(ids.len(), 12);
    // The greedy reply's fourth token as a stop token: it ends there, writing nothing.
    let stop = ids[3];
    let (text, got, finish) = complete(json!({"ignore_eos": true, "stop_token_ids": [stop]})).await;
    assert_eq!((got.as_slice(), finish.as_str()), (&ids[..4], "stop"));
    let (three, _, _) = complete(json!({"ignore_eos": true, "max_tokens": 3})).await;
    assert_eq!(text, three);

    // End-of-sequence made every token's choice: min_tokens holds it off for 5 tokens.
    let eos = eos_id().to_string();
    let (_, got, finish) = complete(json!({"logit_bias": {eos.clone(): 100}})).await;
    assert_eq!((got.len(), finish.as_str()), (1, "stop"));
    let (_, got, finish) =
        complete(json!({"logit_bias": {eos.clone(): 100}, "min_tokens": 5})).await;
    assert_eq!((got.len(), finish.as_str()), (6, "stop"), "{got:?}");
    assert_eq!(got[5], eos_id() as u64);
    assert!(!got[..5].contains(&(eos_id() as u64)));
    // The same for a stop token id, with penalties in the list too.
    let (_, got, _) = complete(
        json!({"ignore_eos": true, "stop_token_ids": [stop], "logit_bias": {stop.to_string(): 100},
        "min_tokens": 4, "presence_penalty": 0.1}),
    )
    .await;
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(!got[..4].contains(&stop) && got[4] == stop);

    // Stop strings: kept with include_stop_str_in_output; not looked for before min_tokens.
    let chars: Vec<char> = plain.chars().collect();
    let s: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let at = plain.find(&s).unwrap();
    let (cut, _, finish) = complete(json!({"ignore_eos": true, "stop": [s.clone()]})).await;
    assert_eq!((cut.as_str(), finish.as_str()), (&plain[..at], "stop"));
    let (kept, _, _) = complete(
        json!({"ignore_eos": true, "stop": [s.clone()], "include_stop_str_in_output": true}),
    )
    .await;
    assert_eq!(kept, plain[..at + s.len()]);
    let (late, _, finish) =
        complete(json!({"ignore_eos": true, "stop": [s.clone()], "min_tokens": 12})).await;
    assert_eq!((late.as_str(), finish.as_str()), (plain.as_str(), "length"));
}

#[tokio::test]
async fn bad_stopping_fields_are_refused() {
    let ask = |extra: Value| {
        let mut b = json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    for (extra, param) in [
        (json!({"stop_token_ids": [100000]}), "stop_token_ids"),
        (json!({"min_tokens": -1}), "min_tokens"),
        (json!({"min_tokens": 5, "max_tokens": 4}), "min_tokens"),
    ] {
        refused(server(), "/v1/chat/completions", &ask(extra.clone()), param).await;
    }
    // Past the default room (min_tokens above what the context leaves): refused too.
    let (s, r) = post(
        server(),
        "/v1/chat/completions",
        &ask(json!({"min_tokens": 100000})),
    )
    .await;
    assert_eq!(s, 400, "{r}");
}

#[tokio::test]
async fn priority_needs_priority_scheduling() {
    let ask = json!({"model": "tiny", "prompt": "the cat sat", "max_tokens": 5, "temperature": 0,
        "ignore_eos": true, "priority": -2});
    refused(server(), "/v1/completions", &ask, "priority").await;
    let (s, _) = post(
        server(),
        "/v1/completions",
        &json!({"prompt": "the cat sat", "priority": 0}),
    )
    .await;
    assert_eq!(s, 200, "priority 0 is everyone's");

    let prio = start_tiny(|sc, _| sc.priority_scheduling = true);
    let (s, high) = post(&prio, "/v1/completions", &ask).await;
    assert_eq!(s, 200, "{high}");
    let mut plain = ask.clone();
    plain.as_object_mut().unwrap().remove("priority");
    let (_, want) = post(server(), "/v1/completions", &plain).await;
    assert_eq!(high["choices"][0]["text"], want["choices"][0]["text"]);
    let big = json!({"prompt": "x", "priority": 1i64 << 40});
    refused(&prio, "/v1/completions", &big, "priority").await;
}

#[tokio::test]
async fn truncate_prompt_tokens_keeps_the_last_tokens() {
    let (s, t) = post(
        server(),
        "/tokenize",
        &json!({"prompt": "the cat sat on the mat and the dog"}),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let ids: Vec<u64> = (t["tokens"].as_array().unwrap().iter())
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(ids.len() > 4, "{ids:?}");
    let ask = |prompt: Value, extra: Value| {
        let mut b =
            json!({"prompt": prompt, "max_tokens": 6, "temperature": 0, "ignore_eos": true});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let (s, cut) = post(
        server(),
        "/v1/completions",
        &ask(json!(ids), json!({"truncate_prompt_tokens": 3})),
    )
    .await;
    assert_eq!(s, 200, "{cut}");
    assert_eq!(cut["usage"]["prompt_tokens"], 3);
    let (_, last) = post(
        server(),
        "/v1/completions",
        &ask(json!(ids[ids.len() - 3..]), json!({})),
    )
    .await;
    assert_eq!(cut["choices"][0]["text"], last["choices"][0]["text"]);
    // A shorter prompt is left whole; a chat prompt is cut the same way.
    let (_, whole) = post(
        server(),
        "/v1/completions",
        &ask(json!(ids), json!({"truncate_prompt_tokens": 1000})),
    )
    .await;
    assert_eq!(whole["usage"]["prompt_tokens"], ids.len());
    let chat = json!({"messages": [{"role": "user", "content": "the cat sat on the mat"}], "max_tokens": 2,
        "truncate_prompt_tokens": 4});
    let (s, r) = post(server(), "/v1/chat/completions", &chat).await;
    assert_eq!((s, &r["usage"]["prompt_tokens"]), (200, &json!(4)), "{r}");
    refused(
        server(),
        "/v1/completions",
        &ask(json!(ids), json!({"truncate_prompt_tokens": 0})),
        "truncate_prompt_tokens",
    )
    .await;
}

/// The token ids of `text` (no special tokens).
async fn tokens(text: &str) -> Vec<u64> {
    let (s, t) = post(
        server(),
        "/tokenize",
        &json!({"prompt": text, "add_special_tokens": false}),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    (t["tokens"].as_array().unwrap().iter())
        .map(|v| v.as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn allowed_token_ids_and_bad_words_keep_tokens_out() {
    let (_, ids, _) = complete(json!({"ignore_eos": true})).await;
    // Only the greedy reply's tokens but its third: the first two stay, the third changes,
    // and nothing outside the list is written.
    let allowed: Vec<u64> = ids.iter().copied().filter(|&t| t != ids[2]).collect();
    let (_, got, _) = complete(json!({"ignore_eos": true, "allowed_token_ids": allowed})).await;
    assert_eq!(got[..2], ids[..2]);
    assert_ne!(got[2], ids[2]);
    assert!(got.iter().all(|t| allowed.contains(t)), "{got:?}");
    // The word of one of the reply's tokens that is tokenized back to it (the random model
    // also writes ids past the tokenizer's), banned: that token is not written again, nor
    // any spelling's tokens (as written, or after a space) one after another.
    let mut word = None;
    for &t in &ids {
        let (s, d) = post(server(), "/detokenize", &json!({"tokens": [t]})).await;
        let text = d["prompt"].as_str().unwrap_or("").to_string();
        if s == 200 && text.trim() == text && !text.is_empty() {
            let t_ = (tokens(&text).await, tokens(&format!(" {text}")).await);
            if t_.0 == [t] || t_.1 == [t] {
                word = Some((text, t));
                break;
            }
        }
    }
    let (word, t) = word.unwrap_or_else(|| panic!("no reply token is a word: {ids:?}"));
    let (_, got, _) = complete(json!({"ignore_eos": true, "bad_words": [word.clone()]})).await;
    assert!(!got.contains(&t), "{word:?} ({t}) in {got:?}");
    for banned in [tokens(&word).await, tokens(&format!(" {word}")).await] {
        assert!(
            !got.windows(banned.len()).any(|w| w == banned),
            "{word:?} ({banned:?}) in {got:?}"
        );
    }
    // The same fields in chat: one token allowed, written at every step.
    let cat = tokens("cat").await[0];
    let chat = json!({"messages": [{"role": "user", "content": "the cat"}], "max_tokens": 4,
        "temperature": 0, "ignore_eos": true, "allowed_token_ids": [cat]});
    let (s, r) = post(server(), "/v1/chat/completions", &chat).await;
    assert_eq!(s, 200, "{r}");
    let (_, one) = post(server(), "/detokenize", &json!({"tokens": [cat]})).await;
    assert_eq!(
        r["choices"][0]["message"]["content"],
        one["prompt"].as_str().unwrap().repeat(4)
    );
    // Refusals name the field.
    for (extra, field) in [
        (json!({"allowed_token_ids": []}), "allowed_token_ids"),
        (
            json!({"allowed_token_ids": [1_000_000]}),
            "allowed_token_ids",
        ),
        (json!({"bad_words": [""]}), "bad_words"),
    ] {
        let mut body = json!({"prompt": "the cat", "max_tokens": 2});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        refused(server(), "/v1/completions", &body, field).await;
    }
}

/// Each chunk's (choice index, usage) where it carries one.
fn usages(chunks: &[Value]) -> Vec<(Option<u64>, Value)> {
    chunks
        .iter()
        .filter(|c| !c["usage"].is_null())
        .map(|c| (c["choices"][0]["index"].as_u64(), c["usage"].clone()))
        .collect()
}

#[tokio::test]
async fn continuous_usage_stats_count_each_choice_as_it_goes() {
    let fn_tool = json!([{"type": "function", "function": {"name": "add", "parameters":
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]);
    for tools in [None, Some(fn_tool)] {
        let mut body = json!({"messages": [{"role": "user", "content": "the cat"}], "max_tokens": 6,
            "temperature": 0, "ignore_eos": true, "stream": true,
            "stream_options": {"continuous_usage_stats": true}});
        if let Some(t) = &tools {
            body["tools"] = t.clone();
        }
        let mut once = body.clone();
        let o = once.as_object_mut().unwrap();
        o.remove("stream");
        o.remove("stream_options");
        let (s, whole) = post(server(), "/v1/chat/completions", &once).await;
        assert_eq!(s, 200, "{whole}");
        let prompt = whole["usage"]["prompt_tokens"].as_u64().unwrap();
        let chunks = stream(server(), "/v1/chat/completions", &body).await;
        // Every chunk, the role's first (0 tokens) to the last (6), and no usage-only chunk
        // without include_usage.
        let u = usages(&chunks);
        assert_eq!(
            u.len(),
            chunks.len(),
            "tools {}: {chunks:?}",
            tools.is_some()
        );
        let counts: Vec<u64> = u
            .iter()
            .map(|(_, u)| u["completion_tokens"].as_u64().unwrap())
            .collect();
        assert_eq!((counts[0], *counts.last().unwrap()), (0, 6), "{counts:?}");
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        for (_, u) in &u {
            assert_eq!(u["prompt_tokens"], prompt);
            assert_eq!(
                u["total_tokens"],
                prompt + u["completion_tokens"].as_u64().unwrap()
            );
        }
    }
    // Completions of two prompts, two choices each, with the last usage chunk too: each
    // choice counts its own tokens against its own prompt.
    let body = json!({"prompt": ["the cat", "the dog sat on"], "n": 2, "max_tokens": 5,
        "temperature": 0.7, "seed": 1, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true}});
    let chunks = stream(server(), "/v1/completions", &body).await;
    let (last, each) = usages(&chunks)
        .split_last()
        .map(|(l, e)| (l.clone(), e.to_vec()))
        .unwrap();
    assert_eq!((last.0, &last.1["completion_tokens"]), (None, &json!(20)));
    let lens = [
        tokens("the cat").await.len(),
        tokens("the dog sat on").await.len(),
    ];
    for choice in 0..4u64 {
        let mine: Vec<&Value> = (each.iter())
            .filter(|(i, _)| *i == Some(choice))
            .map(|(_, u)| u)
            .collect();
        assert_eq!(
            mine.last().unwrap()["completion_tokens"],
            5,
            "choice {choice}"
        );
        assert!(
            mine.iter()
                .all(|u| u["prompt_tokens"] == lens[choice as usize / 2])
        );
    }
    assert_eq!(
        last.1["prompt_tokens"].as_u64().unwrap() as usize,
        lens.iter().sum::<usize>()
    );
}
