//! Grammar-constrained decoding with the real default model's tokenizer: a seeded random walk
//! over the allowed tokens always spells valid JSON for bounded schemas (CPU only), and on the
//! GPU constrained and unconstrained requests in one batch do not affect each other, with
//! overlapped steps or without; token filters (`allowed_token_ids`, `bad_words`) turn greedy
//! decoding aside exactly where they forbid its choice.

mod common;

use std::collections::BTreeMap;

use common::*;
use kiln_engine::{
    ConstraintFactory, EngineConfig, Grammar, Overlap, Request, SamplingParams, TokenFilter,
};
use serde_json::{Value, json};

/// A small xorshift generator, so the walk is reproducible without extra dependencies.
struct Walk(u64);

impl Walk {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn allowed(mask: &[u32]) -> Vec<u32> {
    (0..mask.len() as u32 * 32)
        .filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1)
        .collect()
}

fn bounded_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "pet": {"enum": ["cat", "dog", "none"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
        },
        "required": ["name", "age", "pet", "tags"],
        "additionalProperties": false,
    })
}

fn check_bounded(v: &Value) -> Result<(), String> {
    let o = v.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = o.keys().map(String::as_str).collect();
    if keys != ["name", "age", "pet", "tags"] {
        return Err(format!("keys {keys:?}"));
    }
    let name = o["name"].as_str().ok_or("name")?;
    let age = o["age"].as_i64().ok_or("age")?;
    let pet = o["pet"].as_str().ok_or("pet")?;
    let tags = o["tags"].as_array().ok_or("tags")?;
    let ok = name.chars().count() <= 8
        && (0..=120).contains(&age)
        && ["cat", "dog", "none"].contains(&pet)
        && tags.len() <= 3
        && tags
            .iter()
            .all(|t| t.as_str().is_some_and(|s| s.chars().count() <= 4));
    if ok {
        Ok(())
    } else {
        Err(format!("bounds broken: {v}"))
    }
}

#[test]
fn random_walks_over_allowed_tokens_spell_valid_json() {
    let model = default_model();
    let eos = model.config.eos_token_ids.clone();
    let factory =
        ConstraintFactory::new(&model.tokenizer, &eos, model.config.vocab_size).expect("factory");
    let grammars = [Grammar::JsonSchema(bounded_schema()), Grammar::JsonObject];
    let mut walks = 0;
    for (gi, grammar) in grammars.iter().enumerate() {
        for seed in 1..=12u64 {
            let mut c = factory.compile(grammar).expect("compile");
            let mut rng = Walk(
                seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(gi as u64),
            );
            let mut tokens = Vec::new();
            let mut finished = false;
            for _ in 0..400 {
                let allow = allowed(&c.mask().expect("mask"));
                assert!(!allow.is_empty(), "seed {seed}: the mask allows nothing");
                // Prefer ending when allowed half of the time, so walks terminate.
                let t = match allow.iter().find(|t| eos.contains(t)) {
                    Some(&e) if rng.next().is_multiple_of(2) || tokens.len() > 300 => e,
                    _ => allow[(rng.next() % allow.len() as u64) as usize],
                };
                if eos.contains(&t) {
                    finished = true;
                    break;
                }
                c.consume(t).expect("an allowed token is accepted");
                tokens.push(t);
                if c.is_stopped() {
                    finished = true;
                    break;
                }
            }
            if !finished {
                assert!(
                    gi != 0,
                    "seed {seed}: a walk under a bounded schema must finish"
                );
                continue; // an unbounded json_object walk may wander
            }
            let text = model.tokenizer.decode(&tokens, false).unwrap();
            match gi {
                0 => {
                    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                        panic!("grammar {gi} seed {seed}: {text:?} is not JSON: {e}")
                    });
                    check_bounded(&v).unwrap_or_else(|e| panic!("seed {seed}: {text:?}: {e}"))
                }
                // JSON's grammar allows numbers beyond f64 (a walk may spell 1E17890), which
                // `Value` refuses: check the syntax alone, skipping over the values.
                _ => {
                    serde_json::from_str::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(&text)
                        .unwrap_or_else(|e| {
                            panic!("grammar {gi} seed {seed}: {text:?} is not a JSON object: {e}")
                        });
                }
            }
            assert!(
                separators_are_compact(&text),
                "separators \", \" and \": \" only, no other whitespace: {text:?}"
            );
            walks += 1;
        }
    }
    assert!(walks >= 12, "{walks} walks finished");
}

/// Outside strings, a space only follows `,` or `:`, and every `,` / `:` is followed by one.
fn separators_are_compact(text: &str) -> bool {
    let (mut in_str, mut escaped) = (false, false);
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b',' | b':' if b.get(i + 1) != Some(&b' ') => return false,
            b' ' if i == 0 || !matches!(b[i - 1], b',' | b':') => return false,
            b'\n' | b'\t' | b'\r' => return false,
            _ => {}
        }
    }
    true
}

#[test]
fn constrained_and_unconstrained_requests_share_a_batch_without_interference() {
    let ctx = gpu();
    let model = default_model();
    let eos = model.config.eos_token_ids.clone();
    let factory =
        ConstraintFactory::new(&model.tokenizer, &eos, model.config.vocab_size).expect("factory");
    let chat = |q: &str| {
        let t = model
            .chat_template
            .as_ref()
            .unwrap()
            .render(&[kiln_model::ChatMessage::new("user", q)], true)
            .unwrap();
        model.tokenizer.encode(&t, false).unwrap()
    };
    let prompts = [
        chat("What is the capital of France?"),
        chat("Describe a cat in JSON."),
    ];
    let request = |id: u64, p: &Vec<u32>, seed: u64| Request {
        sampling: SamplingParams {
            temperature: 0.8,
            top_p: 0.9,
            ..SamplingParams::default()
        },
        seed,
        eos_token_ids: eos.clone(),
        ..Request::new(id, p.clone(), 12)
    };
    // Alone: two unconstrained requests.
    let mut e = engine(&ctx, &model, small_config());
    let alone = run_all(
        &mut e,
        vec![request(1, &prompts[0], 5), request(2, &prompts[1], 6)],
    );
    // Together with two constrained ones (ids 3 and 4) in the same steps, with steps
    // overlapped (constrained rows sampled once the previous step's tokens reach their
    // matchers) and without.
    let together = |overlap: bool| {
        let config = EngineConfig {
            overlap: if overlap { Overlap::On } else { Overlap::Off },
            ..small_config()
        };
        let mut e = engine(&ctx, &model, config);
        let mut out: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for r in [request(1, &prompts[0], 5), request(2, &prompts[1], 6)] {
            out.insert(r.id, Vec::new());
            e.add_request(r).unwrap();
        }
        for (id, g) in [
            (3, Grammar::JsonSchema(bounded_schema())),
            (4, Grammar::JsonObject),
        ] {
            out.insert(id, Vec::new());
            let c = factory.compile(&g).unwrap();
            e.add_constrained_request(request(id, &prompts[1], id), c)
                .unwrap();
        }
        while e.has_unfinished() {
            for u in pollster::block_on(e.step()).expect("step") {
                if let Some(t) = u.token {
                    out.get_mut(&u.id).unwrap().push(t.token_id);
                }
            }
        }
        assert!(e.take_failures().is_empty(), "no constraint failed");
        assert_eq!(e.num_overlapped_steps() > 5, overlap);
        out
    };
    let out = together(true);
    assert_eq!(out, together(false), "overlapped steps change nothing");
    assert_eq!(
        out[&1], alone[&1],
        "request 1 is unaffected by constrained neighbours"
    );
    assert_eq!(
        out[&2], alone[&2],
        "request 2 is unaffected by constrained neighbours"
    );
    for id in [3, 4] {
        let text = model.tokenizer.decode(&out[&id], false).unwrap();
        assert!(
            text.starts_with('{'),
            "request {id}: constrained output {text:?} starts a JSON object"
        );
    }
}

#[test]
fn token_filters_turn_greedy_decoding_aside_where_they_forbid_its_choice() {
    let ctx = gpu();
    let model = default_model();
    let eos = model.config.eos_token_ids.clone();
    let prompt = model
        .tokenizer
        .encode("The capital of France is", false)
        .unwrap();
    let greedy = |id, filter| Request {
        filter,
        ..greedy_request(id, prompt.clone(), 10, true, &eos)
    };
    let base = run_all(
        &mut engine(&ctx, &model, small_config()),
        vec![greedy(1, TokenFilter::default())],
    )[&1]
        .clone();
    assert_eq!(base.len(), 10);
    // Only the greedy tokens but its third may be sampled; the pair (base[3], base[4]) may
    // not be written; its first token may not be written at all; and all three beside an
    // unfiltered request, with steps overlapped and not.
    let mut allowed = base.clone();
    allowed.retain(|&t| t != base[2]);
    let filters = [
        TokenFilter {
            allowed: Some({
                let mut a = allowed.clone();
                a.sort_unstable();
                a.dedup();
                a
            }),
            banned: vec![],
        },
        TokenFilter {
            allowed: None,
            banned: vec![vec![base[3], base[4]]],
        },
        TokenFilter {
            allowed: None,
            banned: vec![vec![base[0]]],
        },
    ];
    for overlap in [Overlap::On, Overlap::Off] {
        let config = EngineConfig {
            overlap,
            ..small_config()
        };
        let mut requests = vec![greedy(1, TokenFilter::default())];
        requests.extend((0..3).map(|i| greedy(2 + i as u64, filters[i].clone())));
        let out = run_all(&mut engine(&ctx, &model, config), requests);
        assert_eq!(
            out[&1], base,
            "{overlap:?}: the unfiltered request is unchanged"
        );
        let (only, pair, first) = (&out[&2], &out[&3], &out[&4]);
        assert_eq!(only[..2], base[..2], "{overlap:?}");
        assert!(
            only.iter().all(|t| allowed.contains(t)),
            "{overlap:?}: {only:?}"
        );
        assert_ne!(only[2], base[2], "{overlap:?}");
        assert_eq!(pair[..4], base[..4], "{overlap:?}");
        assert_ne!(pair[4], base[4], "{overlap:?}");
        assert!(
            !pair.windows(2).any(|w| w == [base[3], base[4]]),
            "{overlap:?}: {pair:?}"
        );
        assert_ne!(first[0], base[0], "{overlap:?}");
        assert!(!first.contains(&base[0]), "{overlap:?}: {first:?}");
    }
}
