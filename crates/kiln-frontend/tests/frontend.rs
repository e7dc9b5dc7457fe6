//! The front end on a tiny model: prompt checks, chat rendering, text streams with stop
//! strings and split UTF-8 characters.

use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_core::SampledToken;
use kiln_frontend::{ChatExtras, Frontend, GenerationParams, TextStream};
use kiln_model::testing::{TinyConfig, write_tiny_llama};
use kiln_model::{ChatMessage, Model};
use kiln_scheduler::{FinishReason, RequestUpdate};

/// The front end of a tiny model (its own folder per call: tests run in parallel).
fn frontend() -> Frontend {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("kiln-frontend-{}-{n}", std::process::id()));
    write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    let (f, _, _) = Frontend::split(Model::load(&dir).unwrap());
    std::fs::remove_dir_all(&dir).ok();
    f
}

#[test]
fn prompt_checks_name_the_limit() {
    let f = frontend();
    assert_eq!(f.check_prompt(&[1, 2, 3], 10, Some(7), None), Ok(7));
    assert_eq!(f.check_prompt(&[1, 2, 3], 10, None, Some(4)), Ok(4));
    assert_eq!(f.check_prompt(&[1, 2, 3], 10, None, None), Ok(7));
    assert_eq!(f.check_prompt(&[1, 2, 3], 10, None, Some(100)), Ok(7));
    let e = f.check_prompt(&[1, 2, 3], 10, Some(8), None).unwrap_err();
    assert_eq!(e.param, "max_tokens");
    assert!(e.message.contains("maximum context length is 10"), "{e}");
    assert_eq!(
        f.check_prompt(&[], 10, None, None).unwrap_err().param,
        "prompt"
    );
    let bad = f.vocab_size as u32;
    let e = f.check_prompt(&[1, bad], 10, None, None).unwrap_err();
    assert!(e.message.contains(&bad.to_string()), "{e}");
    assert!(f.check_prompt(&[1; 10], 10, None, None).is_err());
}

#[test]
fn system_prompt_joins_or_leads_the_conversation() {
    let mut f = frontend();
    f.chat_template = None;
    let brief = ChatExtras {
        system: Some("be brief"),
        ..ChatExtras::default()
    };
    let text = f
        .render_chat(vec![ChatMessage::new("user", "hi")], &brief)
        .unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let text = f
        .render_chat(
            vec![
                ChatMessage::new("system", "you are kiln"),
                ChatMessage::new("user", "hi"),
            ],
            &brief,
        )
        .unwrap();
    assert!(text.starts_with("<|im_start|>system\nyou are kiln\n\nbe brief<|im_end|>"));
    let none = ChatExtras::default();
    assert_eq!(f.render_chat(vec![], &none).unwrap_err().param, "messages");
    let tools = [serde_json::json!({"type": "function", "function": {"name": "f"}})];
    let with_tools = ChatExtras {
        tools: Some(&tools),
        ..none
    };
    let no_template = f.render_chat(vec![ChatMessage::new("user", "hi")], &with_tools);
    assert_eq!(no_template.unwrap_err().param, "tools");
}

/// Feeds `text`'s tokens one by one; returns what the stream let out and whether it stopped.
fn stream(f: &Frontend, text: &str, stop: &[&str]) -> (String, bool) {
    stream_after(f, text, stop, 0)
}

/// [`stream`] with stop strings looked for only after the first `min_tokens` tokens.
fn stream_after(f: &Frontend, text: &str, stop: &[&str], min_tokens: usize) -> (String, bool) {
    let ids = f.tokenizer.encode(text, false).unwrap();
    let mut s =
        TextStream::new(stop.iter().map(|s| s.to_string()).collect(), true).stops_after(min_tokens);
    let mut out = String::new();
    for (i, &id) in ids.iter().enumerate() {
        let piece = s.next(&f.tokenizer, Some(id), i + 1 == ids.len()).unwrap();
        out += &piece.text;
        if piece.stopped {
            return (out, true);
        }
    }
    (out, false)
}

#[test]
fn text_stream_cuts_at_stop_strings_and_keeps_characters_whole() {
    let f = frontend();
    assert_eq!(
        stream(&f, "hello END more", &["END"]),
        ("hello ".into(), true)
    );
    assert_eq!(
        stream(&f, "hello END more", &[]),
        ("hello END more".into(), false)
    );
    assert_eq!(
        stream(&f, "café crème", &["x"]),
        ("café crème".into(), false)
    );
    // Every prefix the stream lets out is whole text.
    let ids = f.tokenizer.encode("né à Zürich", false).unwrap();
    let mut s = TextStream::new(vec![], true);
    let mut out = String::new();
    for &id in &ids {
        out += &s.next(&f.tokenizer, Some(id), false).unwrap().text;
        assert!(!out.contains('\u{FFFD}'), "{out:?}");
    }
    out += &s.next(&f.tokenizer, None, true).unwrap().text;
    assert_eq!(out, "né à Zürich");
}

/// The text of `ids` through [`TextStream::update`], the last one ending the sequence (as
/// the token that stopped it when `ended_by_token`).
fn updates(f: &Frontend, ids: &[u32], skip_special: bool, ended_by_token: bool) -> String {
    let mut s = TextStream::new(vec![], skip_special);
    let mut out = String::new();
    for (i, &id) in ids.iter().enumerate() {
        let last = i + 1 == ids.len();
        let u = RequestUpdate {
            id: 1,
            token: Some(SampledToken {
                token_id: id,
                logprob: None,
                top_logprobs: vec![],
                rank: None,
                hidden: None,
            }),
            prompt_logprobs: vec![],
            finished: last.then_some(FinishReason::Stop),
            ended_by_token: last && ended_by_token,
            num_cached_tokens: 0,
        };
        out += &s.update(&f.tokenizer, &u).unwrap().text;
    }
    out
}

#[test]
fn special_tokens_write_text_only_when_asked_and_never_the_stopping_one() {
    let f = frontend();
    let start = f.tokenizer.token_to_id("<|im_start|>").unwrap();
    let end = f.tokenizer.token_to_id("<|im_end|>").unwrap();
    let mut ids = vec![start];
    ids.extend(f.tokenizer.encode("hi there", false).unwrap());
    ids.push(end);
    assert_eq!(updates(&f, &ids, true, true), "hi there");
    assert_eq!(updates(&f, &ids, false, true), "<|im_start|>hi there");
    // A sequence a grammar ended writes its last token.
    assert_eq!(
        updates(&f, &ids, false, false),
        "<|im_start|>hi there<|im_end|>"
    );
    let plain = &ids[1..ids.len() - 1];
    assert_eq!(updates(&f, plain, true, false), "hi there");
    // A stop token id that is not special writes nothing either.
    let before_last = f.tokenizer.decode(&plain[..plain.len() - 1], true).unwrap();
    assert_eq!(updates(&f, plain, true, true), before_last);
    assert_ne!(before_last, "hi there");
}

#[test]
fn model_defaults_reach_the_spec() {
    let mut f = frontend();
    f.defaults.temperature = Some(0.0);
    let spec = f.resolve(&GenerationParams::default(), None).unwrap();
    assert_eq!(spec.sampling.temperature, 0.0);
    let r = f.request(&spec, 9, vec![1, 2], 5, 100, 3);
    assert_eq!((r.id, r.seed, r.max_tokens), (9, 103, 5));
    assert_eq!(r.eos_token_ids, f.eos_token_ids);
}

#[test]
fn token_fields_are_checked_against_the_vocabulary_and_bad_words_tokenized() {
    let f = frontend();
    let params =
        |json: serde_json::Value| -> GenerationParams { serde_json::from_value(json).unwrap() };
    let spec = f
        .resolve(
            &params(serde_json::json!({"allowed_token_ids": [9, 3, 9]})),
            None,
        )
        .unwrap();
    assert_eq!(spec.filter.allowed, Some(vec![3, 9]));
    let r = f.request(&spec, 1, vec![1], 4, 0, 0);
    assert_eq!(
        r.filter, spec.filter,
        "the filter reaches the engine request"
    );
    // Each word as written and after a space, whatever whitespace led it.
    let spec = f
        .resolve(
            &params(serde_json::json!({"bad_words": ["  hello", "hello"]})),
            None,
        )
        .unwrap();
    let mut want = vec![
        f.tokenizer.encode("hello", false).unwrap(),
        f.tokenizer.encode(" hello", false).unwrap(),
    ];
    want.sort();
    want.dedup();
    assert_eq!(spec.filter.banned, want);
    assert!(spec.filter.allowed.is_none());
    let bad = f.vocab_size;
    for (json, field) in [
        (
            serde_json::json!({"allowed_token_ids": []}),
            "allowed_token_ids",
        ),
        (
            serde_json::json!({"allowed_token_ids": [1, bad]}),
            "allowed_token_ids",
        ),
        (serde_json::json!({"bad_words": ["ok", " "]}), "bad_words"),
        (
            serde_json::json!({"stop_token_ids": [bad]}),
            "stop_token_ids",
        ),
        (
            serde_json::json!({"logit_bias": {(bad).to_string(): 1.0}}),
            "logit_bias",
        ),
    ] {
        let e = f.resolve(&params(json.clone()), None).unwrap_err();
        assert_eq!(e.param, field, "{json}: {e}");
    }
}

#[test]
fn min_tokens_finds_a_stop_string_that_ends_after_them() {
    let f = frontend();
    let text = "the cat sat on the mat";
    let ids = f.tokenizer.encode(text, false).unwrap();
    let upto = |k: usize| f.tokenizer.decode(&ids[..k], true).unwrap();
    // The stop string "t s" over the token boundary inside "cat sat", at every split of it
    // that leaves its first character in the first tokens and its last after them.
    let at = text.find("t s").unwrap();
    let mut tried = 0;
    for k in 1..ids.len() {
        let n = upto(k).len();
        if n > at && n < at + 3 {
            tried += 1;
            assert_eq!(
                stream_after(&f, text, &["t s"], k),
                (text[..at].into(), true),
                "{k}"
            );
        }
    }
    assert!(tried > 0, "{ids:?}");
    // Wholly inside the first tokens' text: not found (the next is, in "t on").
    let k = (1..ids.len()).find(|&k| upto(k).len() >= at + 3).unwrap();
    assert_eq!(
        stream_after(&f, text, &["t s", "t o"], k).0,
        text[..text.find("t o").unwrap()]
    );
    assert_eq!(stream_after(&f, text, &["t s"], k), (text.into(), false));
}

#[test]
fn a_long_conversation_leaves_out_its_oldest_exchanges_to_fit() {
    let f = frontend();
    let mut messages = vec![ChatMessage::new("system", "Be brief.")];
    for i in 0..6 {
        messages.push(ChatMessage::new(
            "user",
            format!("question {i} {}", "x".repeat(40)),
        ));
        messages.push(ChatMessage::new(
            "assistant",
            format!("answer {i} {}", "y".repeat(40)),
        ));
    }
    messages.push(ChatMessage::new("user", "the last question"));
    let extras = ChatExtras {
        system: Some("Extra."),
        ..ChatExtras::default()
    };
    let whole = f.chat_tokens(messages.clone(), Some("Extra.")).unwrap();
    let fit = |m: &[ChatMessage], max_len, kept| f.fit_chat(m.to_vec(), &extras, max_len, 10, kept);
    // Room for everything: nothing left out.
    let all = fit(&messages, whole.len() + 10, 0).unwrap();
    assert_eq!((all.dropped, all.prompt.len()), (0, whole.len()));
    // 150 tokens short: whole exchanges go, the fewest that leave a quarter of the space
    // free; the system messages and the last stay.
    let max_len = whole.len() - 150 + 10;
    let space = max_len - 10;
    let fitted = fit(&messages, max_len, 0).unwrap();
    assert!(
        fitted.prompt.len() <= space - space / 4,
        "{} of {space}",
        fitted.prompt.len()
    );
    assert!(
        fitted.dropped > 0 && fitted.dropped.is_multiple_of(2),
        "{}",
        fitted.dropped
    );
    let text = f.tokenizer.decode(&fitted.prompt, false).unwrap();
    assert!(
        text.contains("Be brief.") && text.contains("Extra.") && text.contains("the last question")
    );
    let first_kept = fitted.dropped / 2;
    assert!(text.contains(&format!("question {first_kept} ")), "{text}");
    // One exchange fewer left out would not have left the quarter free.
    let mut one_more: Vec<ChatMessage> = vec![messages[0].clone()];
    one_more.extend_from_slice(&messages[1 + fitted.dropped - 2..]);
    let longer = f.chat_tokens(one_more, Some("Extra.")).unwrap();
    assert!(longer.len() > space - space / 4);
    // The next turns keep that cut while the rest fits after it: the prompt only grows, so
    // the prefix cache serves every turn before.
    let mut convo = messages.clone();
    let mut prompt = fitted.prompt.clone();
    let mut cut = fitted.dropped;
    let (mut moved, mut kept) = (false, 0);
    for turn in 0..6 {
        convo.push(ChatMessage::new(
            "assistant",
            format!("reply {turn} {}", "z".repeat(30)),
        ));
        convo.push(ChatMessage::new("user", format!("more {turn}")));
        let next = fit(&convo, max_len, cut).unwrap();
        assert!(next.prompt.len() + 10 <= max_len);
        if next.dropped == cut {
            assert_eq!(
                next.prompt[..prompt.len() - 3],
                prompt[..prompt.len() - 3],
                "turn {turn}"
            );
            kept += 1;
        } else {
            assert!(next.dropped > cut, "turn {turn}");
            moved = true;
        }
        (prompt, cut) = (next.prompt, next.dropped);
    }
    assert!(moved, "six more exchanges must move the cut");
    assert!(
        kept >= 2,
        "the cut must hold for turns after it: held {kept} of 6"
    );
    // The latest exchange alone too long for the context: an error with the numbers.
    let e = fit(&messages, 40, 0).unwrap_err();
    assert_eq!(e.param, "messages");
    assert!(e.message.contains("context of 40 tokens"), "{e}");
}
