//! The real default model (SmolLM2-135M-Instruct, GGUF Q4_1) on the GPU against the
//! Hugging Face transformers reference in tests/reference/. The reference test runs both
//! kernel families with the default f16 KV cache, and the row-wise family with f32 KV; the
//! prompt logprobs of the reference's greedy continuations rank its tokens first; decodes
//! with guesses of their next tokens (speculative decoding) keep the reference's tokens; an
//! fp8 KV cache stays near the reference and agrees with the f16 cache's top token over a
//! long sampled text.

mod common;

use common::*;
use kiln_core::{BLOCK_SIZE, StepBatch};
use kiln_engine::{EngineConfig, KernelFamily, KvDtype};
use kiln_model::ChatMessage;

fn prompt_ids(model: &kiln_model::Model, p: &serde_json::Value) -> Vec<u32> {
    let text = p["text"].as_str().unwrap();
    let ids = model.tokenizer.encode(text, false).unwrap();
    let want: Vec<u32> = p["input_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(ids, want, "tokenization of {text:?}");
    ids
}

/// One sequence, the whole prompt in one step, blocks 0.. in order.
fn prefill_batch(ids: &[u32]) -> StepBatch {
    let table: Vec<u32> = (0..ids.len().div_ceil(BLOCK_SIZE) as u32).collect();
    chunk(ids, 0, &table)
}

#[test]
fn last_logits_and_greedy_tokens_match_reference() {
    let ctx = gpu();
    let model = default_model();
    let reference = reference();
    for (kernels, kv_dtype) in [
        (KernelFamily::Gpu, KvDtype::F16),
        (KernelFamily::Cpu, KvDtype::F16),
        (KernelFamily::Cpu, KvDtype::F32),
    ] {
        let start = std::time::Instant::now();
        let mut engine = engine(
            &ctx,
            &model,
            EngineConfig {
                kernels,
                kv_dtype,
                ..small_config()
            },
        );
        let worst = check_reference(
            &model,
            &reference,
            &mut engine,
            &format!("kernels {kernels} kv {kv_dtype}"),
        );
        eprintln!(
            "kernels {kernels} kv {kv_dtype}: worst top-20 logit difference {worst:.4}, {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
}

/// An 8-bit KV cache against the reference and the f16 cache: the reference prompts' top-20
/// last logits within `tol` of the reference's (and, where `greedy`, its 32 greedy tokens),
/// and, teacher-forced over a 600-token text the model wrote with the f16 cache (sampled at
/// temperature 0.8, seeded), the same top token as the f16 cache at `agree_pct`% of the
/// positions or more. Returns (worst logit difference, agreeing positions, positions).
fn check_8bit_cache(
    dtype: KvDtype,
    tol: f32,
    greedy: bool,
    agree_pct: usize,
) -> (f32, usize, usize) {
    let ctx = gpu();
    let model = default_model();
    let mut small = cpu_engine(&ctx, &model, dtype);
    let reference = reference();
    let what = format!("kv {dtype}");
    let worst = if greedy {
        check_reference_within(&model, &reference, &mut small, &what, tol)
    } else {
        let mut worst = 0f32;
        for (name, p) in reference["prompts"].as_object().unwrap() {
            let logits = pollster::block_on(
                small
                    .runner()
                    .logits(&prefill_batch(&prompt_ids(&model, p))),
            )
            .unwrap()
            .remove(0);
            let top = &p["last_logits_top20"];
            for (id, want) in
                (top["ids"].as_array().unwrap().iter()).zip(top["values"].as_array().unwrap())
            {
                let (id, want) = (id.as_u64().unwrap() as usize, want.as_f64().unwrap() as f32);
                let d = (logits[id] - want).abs();
                assert!(
                    d < tol,
                    "{what}: {name}: token {id}: {} vs {want}",
                    logits[id]
                );
                worst = worst.max(d);
            }
        }
        worst
    };

    let (prompt, all, a) = f16_scored(&ctx, &model);
    let b = top_tokens(&mut small, all);
    assert_eq!((a.len(), b.len()), (all.len() - 1, all.len() - 1));
    let n = a.len() - prompt.len();
    let agree = (a[prompt.len()..].iter().zip(&b[prompt.len()..]))
        .filter(|(x, y)| x == y)
        .count();
    eprintln!(
        "{what}: worst top-20 logit difference {worst:.4} from the reference; top token the f16 cache's at {agree} of {n} positions"
    );
    assert!(
        agree * 100 >= n * agree_pct,
        "{what}: the f16 cache's top token at {agree} of {n} positions"
    );
    (worst, agree, n)
}

/// The row-wise kernels' engine with the KV cache in `kv_dtype`.
fn cpu_engine(
    ctx: &kiln_gpu::GpuContext,
    model: &kiln_model::Model,
    kv_dtype: KvDtype,
) -> kiln_engine::Engine {
    let config = EngineConfig {
        kernels: KernelFamily::Cpu,
        kv_dtype,
        ..small_config()
    };
    engine(ctx, model, config)
}

/// The chat prompt, the 600-token text (prompt and reply) the model writes from it with the
/// f16 cache (temperature 0.8, seeded), and that cache's top token after each of its
/// positions: made once for the tests that compare against it (most of their time).
fn f16_scored(
    ctx: &kiln_gpu::GpuContext,
    model: &kiln_model::Model,
) -> &'static (Vec<u32>, Vec<u32>, Vec<u32>) {
    static SCORED: std::sync::OnceLock<(Vec<u32>, Vec<u32>, Vec<u32>)> = std::sync::OnceLock::new();
    SCORED.get_or_init(|| {
        let mut f16 = cpu_engine(ctx, model, KvDtype::F16);
        let prompt = prompt_ids(model, &reference()["prompts"]["chat"]);
        let sampling = kiln_engine::SamplingParams {
            temperature: 0.8,
            ..kiln_engine::SamplingParams::greedy()
        };
        let request = kiln_engine::Request {
            sampling,
            seed: 7,
            ignore_eos: true,
            ..kiln_engine::Request::new(1, prompt.clone(), 600 - prompt.len())
        };
        let text = run_all(&mut f16, vec![request]).remove(&1).unwrap();
        let all = [&prompt[..], &text].concat();
        let top = top_tokens(&mut f16, &all);
        (prompt, all, top)
    })
}

/// `engine`'s top token after each position of `all` but the last, teacher-forced.
fn top_tokens(engine: &mut kiln_engine::Engine, all: &[u32]) -> Vec<u32> {
    let request = kiln_engine::Request {
        prompt_logprobs: Some(1),
        ..kiln_engine::Request::new(2, all.to_vec(), 0)
    };
    engine.add_request(request).unwrap();
    let mut rows = Vec::new();
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).unwrap() {
            rows.extend(u.prompt_logprobs.into_iter().map(|t| t.top_logprobs[0].0));
        }
    }
    rows
}

/// q8_0 (bytes with an f16 scale per 32) keeps the reference's greedy tokens.
#[test]
fn q8_kv_cache_keeps_the_reference_tokens() {
    check_8bit_cache(KvDtype::Q8, 0.6, false, 97);
}

/// fp8 (E4M3, no scale) is coarse for this small model: the last logits move up to about
/// 1.1 and its greedy tokens part from the reference's (measured on lavapipe; BENCHMARKS.md).
#[test]
fn fp8_kv_cache_stays_near_the_f16_cache() {
    check_8bit_cache(KvDtype::Fp8, 1.5, false, 92);
}

/// With speculative decoding by prompt lookup, the greedy tokens are still the reference's,
/// and some guesses are confirmed along the way.
#[test]
fn guessed_decodes_keep_the_reference_greedy_tokens() {
    let ctx = gpu();
    let model = default_model();
    let ec = EngineConfig {
        speculation: Some(kiln_engine::Speculation {
            num_tokens: 5,
            lookup_min: 1,
            lookup_max: 4,
        }),
        ..small_config()
    };
    let mut engine = engine(&ctx, &model, ec);
    check_reference(&model, &reference(), &mut engine, "guessing");
    let s = engine.stats();
    assert!(
        s.spec_accepted_tokens > 0,
        "no guess confirmed ({} made)",
        s.spec_draft_tokens
    );
    eprintln!(
        "{} of {} guesses confirmed",
        s.spec_accepted_tokens, s.spec_draft_tokens
    );
}

/// Every reference prompt: the top-20 last logits within 0.05 and 32 greedy tokens equal.
/// Returns the worst logit difference.
fn check_reference(
    model: &kiln_model::Model,
    reference: &serde_json::Value,
    engine: &mut kiln_engine::Engine,
    what: &str,
) -> f32 {
    check_reference_within(model, reference, engine, what, 0.05)
}

/// [`check_reference`] with the logits within `tol`.
fn check_reference_within(
    model: &kiln_model::Model,
    reference: &serde_json::Value,
    engine: &mut kiln_engine::Engine,
    what: &str,
    tol: f32,
) -> f32 {
    let mut worst = 0f32;
    for (name, p) in reference["prompts"].as_object().unwrap() {
        let name = format!("{what}: {name}");
        let ids = prompt_ids(model, p);
        let logits = pollster::block_on(engine.runner().logits(&prefill_batch(&ids)))
            .unwrap()
            .remove(0);
        let top = &p["last_logits_top20"];
        for (id, want) in top["ids"]
            .as_array()
            .unwrap()
            .iter()
            .zip(top["values"].as_array().unwrap())
        {
            let (id, want) = (id.as_u64().unwrap() as usize, want.as_f64().unwrap() as f32);
            worst = worst.max((logits[id] - want).abs());
            assert!(
                (logits[id] - want).abs() < tol,
                "{name}: logit of token {id}: got {}, want {want}",
                logits[id]
            );
        }
        let want: Vec<u32> = p["greedy_32"]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let out = run_all(
            engine,
            vec![greedy_request(
                1,
                ids,
                32,
                true,
                &model.config.eos_token_ids,
            )],
        );
        assert_eq!(out[&1], want, "{name}: greedy tokens");
    }
    worst
}

/// Prompt logprobs of each reference prompt followed by its 32 reference greedy tokens: each
/// of those tokens is ranked first where it was generated (transformers' argmax), and at the
/// last prompt position the 20 alternatives' log-probabilities differ from the first's as
/// the reference's logits do (within 0.1: the logits' tolerance on each side).
#[test]
fn prompt_logprobs_rank_the_reference_greedy_tokens_first() {
    let ctx = gpu();
    let model = default_model();
    let reference = reference();
    let mut engine = engine(&ctx, &model, small_config());
    let mut worst = 0f32;
    for (name, p) in reference["prompts"].as_object().unwrap() {
        let ids = prompt_ids(&model, p);
        let greedy: Vec<u32> = (p["greedy_32"]["ids"].as_array().unwrap().iter())
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let request = kiln_engine::Request {
            prompt_logprobs: Some(20),
            ..kiln_engine::Request::new(1, [&ids[..], &greedy].concat(), 0)
        };
        engine.add_request(request).unwrap();
        let mut scored = Vec::new();
        while engine.has_unfinished() {
            for u in pollster::block_on(engine.step()).unwrap() {
                scored.extend(u.prompt_logprobs);
            }
        }
        assert_eq!(scored.len(), ids.len() + 31, "{name}");
        // Row `p` scores token `p + 1`: the greedy tokens are scored from row ids.len() - 1.
        let ranks: Vec<u32> = scored[ids.len() - 1..]
            .iter()
            .map(|t| t.rank.unwrap())
            .collect();
        assert!(
            ranks.iter().all(|&r| r == 1),
            "{name}: ranks of the greedy tokens {ranks:?}"
        );
        let last = &scored[ids.len() - 1];
        let lp = |id: u32| last.top_logprobs.iter().find(|t| t.0 == id).map(|t| t.1);
        let top = &p["last_logits_top20"];
        let want: Vec<(u32, f32)> = (top["ids"].as_array().unwrap().iter())
            .zip(top["values"].as_array().unwrap())
            .map(|(i, v)| (i.as_u64().unwrap() as u32, v.as_f64().unwrap() as f32))
            .collect();
        let first = lp(want[0].0).expect("the reference's top token among the alternatives");
        for &(id, logit) in &want[1..] {
            // A token near the 20th place may fall just outside kiln's 20.
            let Some(v) = lp(id) else { continue };
            let (got, want) = (v - first, logit - want[0].1);
            assert!(
                (got - want).abs() < 0.1,
                "{name}: token {id}: {got} vs {want}"
            );
            worst = worst.max((got - want).abs());
        }
    }
    eprintln!("alternatives' log-prob gaps within {worst:.4} of the reference's logit gaps");
}

#[test]
fn chat_prompt_answers_paris() {
    let ctx = gpu();
    let model = default_model();
    let template = model
        .chat_template
        .as_ref()
        .expect("the model has a chat template");
    let text = template
        .render(
            &[ChatMessage::new("user", "What is the capital of France?")],
            true,
        )
        .unwrap();
    let ids = model.tokenizer.encode(&text, false).unwrap();
    let mut engine = engine(&ctx, &model, small_config());
    let out = run_all(
        &mut engine,
        vec![greedy_request(
            7,
            ids,
            40,
            false,
            &model.config.eos_token_ids,
        )],
    );
    let answer = model.tokenizer.decode(&out[&7], true).unwrap();
    assert_eq!(answer.trim(), "The capital of France is Paris.");
}

/// The same prompt alone and batched with prompts of other lengths gives the same tokens.
#[test]
fn batching_does_not_change_greedy_tokens() {
    let ctx = gpu();
    let model = default_model();
    let eos = model.config.eos_token_ids.clone();
    let texts = [
        "The quick brown fox",
        "Once upon a time, in a land far away, there lived a king who had three daughters. The youngest",
        "def fibonacci(n):",
        "1, 2, 3, 4,",
    ];
    let prompts: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| model.tokenizer.encode(t, false).unwrap())
        .collect();
    let mut engine = engine(&ctx, &model, small_config());
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            run_all(
                &mut engine,
                vec![greedy_request(1, p.clone(), 12, true, &eos)],
            )
            .remove(&1)
            .unwrap()
        })
        .collect();
    let mut engine = engine_no_cache(&ctx, &model);
    let together = run_all(
        &mut engine,
        prompts
            .iter()
            .enumerate()
            .map(|(i, p)| greedy_request(i as u64, p.clone(), 12, true, &eos))
            .collect(),
    );
    for (i, want) in alone.iter().enumerate() {
        assert_eq!(&together[&(i as u64)], want, "prompt {i} batched");
    }
}

fn engine_no_cache(ctx: &kiln_gpu::GpuContext, model: &kiln_model::Model) -> kiln_engine::Engine {
    engine(
        ctx,
        model,
        kiln_engine::EngineConfig {
            enable_prefix_caching: false,
            ..small_config()
        },
    )
}
