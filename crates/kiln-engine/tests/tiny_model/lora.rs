//! LoRA adapters at run time against models that have them merged into their weights (the
//! test writer's `W + scale * B A`, computed on the CPU): requests through two adapters and
//! through none in the same steps (one read from PEFT's folder, one from llama.cpp's GGUF
//! adapter file), each giving the tokens and log-probs of its own merged model; and no cached
//! block shared across adapters.

use std::sync::Arc;

use kiln_model::testing::{LLAMA_PROJECTIONS, TinyConfig, TinyLora};
use kiln_model::{LoraAdapter, Model};

use super::*;

/// The test's adapters: every projection at rank 3 (the MLP's at 5), and q and v only at
/// rank 5 with rsLoRA's scale. `modules` names the model's projections.
pub(super) fn adapters(modules: [&[&str]; 2]) -> [TinyLora; 2] {
    let names = |m: &[&str]| m.iter().map(|s| s.to_string()).collect();
    [
        TinyLora {
            modules: names(modules[0]),
            rank: 3,
            alpha: 8.0,
            rslora: false,
            seed: 101,
        },
        TinyLora {
            modules: names(modules[1]),
            rank: 5,
            alpha: 4.0,
            rslora: true,
            seed: 102,
        },
    ]
}

/// Writes each of `tiny` (as `a0`, `a1.gguf`, ...) for `base`, the model `cfg` of `seed`, and that
/// model with it merged in; returns the adapters, read back and checked, and the merged models.
pub(super) fn fixtures(
    dir: &std::path::Path,
    cfg: &TinyConfig,
    seed: u64,
    tiny: &[TinyLora],
    base: &Model,
) -> (Vec<Arc<LoraAdapter>>, Vec<Model>) {
    let mut out = (Vec::new(), Vec::new());
    for (i, t) in tiny.iter().enumerate() {
        let name = format!("a{i}");
        let m = dir.join(format!("m{i}"));
        // The second as llama.cpp's GGUF adapter file, the first as PEFT's folder.
        let a = match i {
            1 => dir.join(format!("{name}.gguf")),
            _ => dir.join(&name),
        };
        match i {
            1 => t.write_gguf(&a, &base.config, DType::F32).unwrap(),
            _ => t.write(&a, &base.config, DType::F32).unwrap(),
        }
        t.write_merged(&m, cfg, seed, DType::F32).unwrap();
        out.0.push(Arc::new(
            LoraAdapter::load(&name, &a, &base.config).unwrap(),
        ));
        out.1.push(Model::load(&m).unwrap());
    }
    out
}

/// The tiny Llama model (seed 7) written under `dir`, with the test's adapters on every
/// projection and on q and v: the model's config, the model, the adapters read back and the
/// merged models.
pub(super) fn llama_with_adapters(
    dir: &std::path::Path,
) -> (
    kiln_model::ModelConfig,
    Model,
    Vec<Arc<LoraAdapter>>,
    Vec<Model>,
) {
    let (cfg, seed) = (TinyConfig::default(), 7);
    let base_dir = dir.join("base");
    let mc = write_tiny_llama(&base_dir, &cfg, seed).unwrap();
    let base = Model::load(&base_dir).unwrap();
    let tiny = adapters([&LLAMA_PROJECTIONS, &["q_proj", "v_proj"]]);
    let (loaded, merged) = fixtures(dir, &cfg, seed, &tiny, &base);
    (mc, base, loaded, merged)
}

/// Same greedy tokens up to where the reference's top two are within 0.01 (a near tie that
/// f16 rounding of different weights may break either way), log-probs within `tol`.
pub(super) fn assert_close(what: &str, got: &[SampledToken], want: &[SampledToken], tol: f32) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (gl, wl) = (g.logprob.unwrap(), w.logprob.unwrap());
        if g.token_id != w.token_id {
            let gap = w.top_logprobs[0].1 - w.top_logprobs[1].1;
            assert!(
                gap < 0.01,
                "{what}: token {i}: {} vs {} (gap {gap})",
                g.token_id,
                w.token_id
            );
            return;
        }
        assert!(
            (gl - wl).abs() < tol,
            "{what}: token {i}: logprob {gl} vs {wl}"
        );
    }
}

/// `tol`: how far log-probs may be apart. The merged model's weights are rounded to f16 on
/// the GPU after the adapter is added, the adapted model's before (its adapter staying f32):
/// Llama and Phi-3 land within 3e-4 of each other, Gemma 3 (embeddings scaled by the square
/// root of the width, gains of 1 + w) within 0.025, as far as either is from the CPU's f32
/// forward pass of the merged model (0.02-0.03 at the same token). Without their adapters the
/// log-probs move by more than 0.05 (checked below).
fn check(cfg: &TinyConfig, modules: [&[&str]; 2], tol: f32) {
    let ctx = gpu();
    let seed = 7;
    let dir = tempfile::tempdir().unwrap();
    let base_dir = dir.path().join("base");
    let mc = write_tiny_llama(&base_dir, cfg, seed).unwrap();
    let base = Model::load(&base_dir).unwrap();
    let tiny = adapters(modules);
    let (loaded, merged) = fixtures(dir.path(), cfg, seed, &tiny, &base);
    let prompt = tokens(3, 40, mc.vocab_size);
    let other = tokens(4, 21, mc.vocab_size);
    for kernels in FAMILIES {
        let ec = || on(config(64, true), kernels, KvDtype::F32);
        let what = |s: &str| format!("{:?} {kernels:?}: {s}", cfg.architecture);
        // What each model alone gives.
        let alone = |m: &Model, p: &[u32]| {
            let mut e = engine(&ctx, m, ec());
            run(&mut e, vec![request(1, p.to_vec(), 6)])
                .remove(&1)
                .unwrap()
        };
        let want_base = alone(&base, &prompt);
        let want: Vec<_> = merged.iter().map(|m| alone(m, &prompt)).collect();
        let want_other = alone(&merged[0], &other);
        let fresh = tokens(5, 40, mc.vocab_size);
        let want_fresh = [alone(&base, &fresh), alone(&merged[0], &fresh)];
        // Each adapter changes the model's output (else the test could not fail).
        for (i, w) in want.iter().enumerate() {
            let moved = (w.iter().zip(&want_base))
                .map(|(a, b)| (a.logprob.unwrap() - b.logprob.unwrap()).abs())
                .fold(0f32, f32::max);
            let changed = ids(w) != ids(&want_base) || moved > 0.05;
            assert!(
                changed,
                "{}",
                what(&format!("adapter {i} moves log-probs {moved}"))
            );
        }

        // All of them in the same steps, through one engine.
        let ec = EngineConfig {
            lora: loaded.clone(),
            ..ec()
        };
        let mut e = engine(&ctx, &base, ec);
        let refs = ["a0", "a1"].map(|n| e.lora_ref(n).expect("loaded"));
        let through = |id, p: &[u32], lora: Option<usize>| Request {
            lora: lora.map(|i| refs[i]),
            ..request(id, p.to_vec(), 6)
        };
        let got = run(
            &mut e,
            vec![
                through(1, &prompt, None),
                through(2, &prompt, Some(0)),
                through(3, &prompt, Some(1)),
                through(4, &other, Some(0)),
            ],
        );
        assert_close(&what("no adapter"), &got[&1], &want_base, tol);
        assert_close(&what("adapter 0"), &got[&2], &want[0], tol);
        assert_close(&what("adapter 1"), &got[&3], &want[1], tol);
        assert_close(&what("adapter 0, other prompt"), &got[&4], &want_other, tol);

        // A prompt's blocks are cached once per adapter: a request through another adapter
        // computes them again, one through the same adapter (or none, again) finds them.
        for (id, lora, cached) in [
            (5, None, 0),
            (6, Some(0), 0),
            (7, Some(0), 32),
            (8, None, 32),
        ] {
            e.add_request(through(id, &fresh, lora)).unwrap();
            let mut seen = None;
            let mut out = Vec::new();
            while e.has_unfinished() {
                for u in pollster::block_on(e.step()).unwrap() {
                    seen = seen.or(Some(u.num_cached_tokens));
                    out.extend(u.token);
                }
            }
            assert_eq!(
                seen,
                Some(cached),
                "{}",
                what(&format!("request {id} cached"))
            );
            let want = &want_fresh[lora.is_some() as usize];
            assert_close(&what(&format!("request {id}")), &out, want, tol);
        }
        // An id the engine does not hold, or that is another adapter's, is refused.
        for (id, fingerprint) in [(2, 0), (1, refs[0].fingerprint)] {
            let stale = Request {
                lora: Some(kiln_engine::LoraRef { id, fingerprint }),
                ..request(9, prompt.clone(), 2)
            };
            let err = e.add_request(stale).unwrap_err().to_string();
            assert!(
                err.contains(&format!("no longer loaded (id {id})")),
                "{err}"
            );
        }
    }
}

#[test]
fn llama_adapters_match_merged_models() {
    let all = LLAMA_PROJECTIONS;
    check(&TinyConfig::default(), [&all, &["q_proj", "v_proj"]], 0.002);
}

#[test]
fn gemma3_adapters_match_merged_models() {
    // q/k norms (a separate rotary launch), post-norms (products into their own buffer).
    let all = LLAMA_PROJECTIONS;
    check(
        &TinyConfig::gemma3(),
        [&all, &["k_proj", "down_proj"]],
        0.04,
    );
}

#[test]
fn granite_adapters_match_merged_models() {
    // Its residual multiplier on what o_proj and down_proj add, their adapters' share too
    // (without it in the adapters', the first token differs). Only the residual multiplier
    // (the others scale the f16 roundings of the two models apart too); its 1.6 takes them
    // 0.004 apart.
    let all = LLAMA_PROJECTIONS;
    let cfg = TinyConfig {
        granite: Some(kiln_model::GraniteScales {
            embedding: 1.0,
            attention: 0.25,
            residual: 1.6,
            logits: 1.0,
        }),
        ..TinyConfig::granite()
    };
    check(&cfg, [&all, &["o_proj", "down_proj"]], 0.01);
}

#[test]
fn smollm3_adapters_match_merged_models() {
    // Its GGUF adapter's q and k rows permuted as Llama's (unpermuted, the second adapter's
    // first log-prob moves by 0.28); a layer without RoPE. Four layers and fast rotations take the two
    // models' f16 roundings up to 0.005 apart.
    let all = LLAMA_PROJECTIONS;
    check(&TinyConfig::smollm3(), [&all, &["q_proj", "k_proj"]], 0.01);
}

#[test]
fn phi3_adapters_match_merged_models() {
    // Fused q/k/v and gate/up tensors.
    let all = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"];
    check(&TinyConfig::phi3(), [&all, &["qkv_proj"]], 0.002);
}

#[test]
fn glm4_adapters_match_merged_models() {
    // Its q and k rows stored with the rotary pairs side by side, B's as the weights' (put
    // back alike), post-norms and fused gate/up.
    let all = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_up_proj",
        "down_proj",
    ];
    check(&TinyConfig::glm4(), [&all, &["q_proj", "k_proj"]], 0.01);
}

#[test]
fn arcee_adapters_match_merged_models() {
    // An adapter on up_proj adds to the product before its activation, which then runs as a
    // launch of its own (ungated.wgsl) instead of in the product's epilogue.
    let all = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "up_proj",
        "down_proj",
    ];
    check(&TinyConfig::arcee(), [&all, &["up_proj"]], 0.01);
}

#[test]
fn an_adapter_for_another_model_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = TinyConfig::default();
    let mc = write_tiny_llama(&dir.path().join("base"), &cfg, 1).unwrap();
    let wider = TinyConfig {
        hidden_size: cfg.hidden_size * 2,
        ..cfg.clone()
    };
    let a = dir.path().join("a");
    let lora = adapters([&["q_proj"], &["q_proj"]]);
    lora[0]
        .write(&a, &wider.model_config(), DType::F16)
        .unwrap();
    let err = LoraAdapter::load("a", &a, &mc).unwrap_err().to_string();
    assert!(
        err.contains("adapter_model.safetensors") && err.contains("q_proj"),
        "{err}"
    );
    // DoRA, which PEFT saves in the same layout, is refused rather than run as LoRA.
    let b = dir.path().join("b");
    TinyLora {
        modules: vec!["q_proj".into()],
        ..lora[0].clone()
    }
    .write(&b, &mc, DType::F16)
    .unwrap();
    let cfg_path = b.join("adapter_config.json");
    let text = std::fs::read_to_string(&cfg_path).unwrap();
    std::fs::write(
        &cfg_path,
        text.replace("\"use_dora\": false", "\"use_dora\": true"),
    )
    .unwrap();
    let err = LoraAdapter::load("b", &b, &mc).unwrap_err().to_string();
    assert!(err.contains("DoRA"), "{err}");
}

/// A GGUF base (whose q and k rows llama.cpp stores permuted, un-permuted at load) through
/// an adapter made for the Hugging Face layout, with overlapped steps and speculative
/// decoding on: the merged Hugging Face model's tokens.
#[test]
fn a_gguf_base_with_overlap_and_guesses_matches_the_merged_model() {
    use kiln_engine::{Overlap, Speculation};
    use kiln_model::testing::write_tiny_gguf;
    let ctx = gpu();
    let (cfg, seed) = (TinyConfig::default(), 7);
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("base.gguf");
    let mc = write_tiny_gguf(&gguf, &cfg, seed, DType::F32).unwrap();
    let base = Model::load(&gguf).unwrap();
    let all = LLAMA_PROJECTIONS;
    let [lora, _] = adapters([&all, &all]);
    let (a, m) = (dir.path().join("a"), dir.path().join("m"));
    lora.write(&a, &mc, DType::F32).unwrap();
    lora.write_merged(&m, &cfg, seed, DType::F32).unwrap();
    let adapter = Arc::new(LoraAdapter::load("a", &a, &base.config).unwrap());
    let merged = Model::load(&m).unwrap();
    // A prompt that repeats itself, so that decodes guess from their history.
    let mut prompt = tokens(8, 24, mc.vocab_size);
    prompt.extend_from_within(..);
    for kernels in FAMILIES {
        let ec = || on(config(64, true), kernels, KvDtype::F32);
        let mut e = engine(&ctx, &merged, ec());
        let want = run(&mut e, vec![request(1, prompt.clone(), 12)])
            .remove(&1)
            .unwrap();
        let ec = EngineConfig {
            lora: vec![adapter.clone()],
            overlap: Overlap::On,
            speculation: Some(Speculation {
                num_tokens: 3,
                lookup_min: 1,
                lookup_max: 3,
            }),
            ..ec()
        };
        let mut e = engine(&ctx, &base, ec);
        let lora = e.lora_ref("a");
        let got = run(
            &mut e,
            vec![Request {
                lora,
                ..request(1, prompt.clone(), 12)
            }],
        );
        assert_close(&format!("{kernels:?}"), &got[&1], &want, 0.002);
        assert!(
            e.stats().spec_draft_tokens > 0,
            "{kernels:?}: no guesses made"
        );
    }
}
