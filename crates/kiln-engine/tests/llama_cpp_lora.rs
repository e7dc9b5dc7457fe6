//! kiln against llama.cpp on a GGUF LoRA adapter file: `scripts/llama-cpp-compare.sh` makes an
//! F32 version of the default model with llama.cpp's quantizer, writes a random rank-8 adapter
//! for every projection with the `gguf` package's writer (not kiln's), and runs llama.cpp on
//! the CPU with and without it (`scripts/llama_cpp_lora.py`); this test, ignored otherwise,
//! runs kiln on the same two files.
//!
//! With the adapter kiln must give llama.cpp's greedy tokens (16 per reference prompt), its
//! teacher-forced top-1 token at 95% or more of the forced positions, and the top 20
//! log-probabilities after the chat prompt within 0.02, while the adapter moves llama.cpp's
//! own by more than ten times that (so reading it wrongly, or not at all, fails).

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use kiln_core::SamplingParams;
use kiln_engine::{EngineConfig, KvDtype, Request};
use kiln_model::{LoraAdapter, Model};
use serde_json::Value;

fn floats(v: &Value) -> Vec<f32> {
    (v.as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

#[test]
#[ignore = "needs llama.cpp's outputs: run scripts/llama-cpp-compare.sh"]
fn gguf_lora_adapter_matches_llama_cpp() {
    let dir = PathBuf::from(
        std::env::var("KILN_LLAMA_CPP_DIR").expect("KILN_LLAMA_CPP_DIR: llama.cpp's outputs"),
    );
    let want: Value =
        serde_json::from_slice(&std::fs::read(dir.join("lora.compare.json")).unwrap()).unwrap();
    let model = Model::load(&dir.join(want["base"].as_str().unwrap())).unwrap();
    let file = dir.join(want["adapter"].as_str().unwrap());
    let adapter = Arc::new(LoraAdapter::load("lora", &file, &model.config).unwrap());
    let ctx = gpu();
    let mut engine = engine(
        &ctx,
        &model,
        EngineConfig {
            lora: vec![adapter],
            // llama.cpp's default KV cache type.
            kv_dtype: KvDtype::F16,
            ..small_config()
        },
    );
    let lora = engine.lora_ref("lora");
    assert!(lora.is_some());
    let (with, without) = (&want["with"], &want["without"]);

    // Greedy tokens, per prompt.
    for (name, g) in with["greedy"].as_object().unwrap() {
        let expected = ids(&g["ids"]);
        let r = Request {
            lora,
            ..greedy_request(1, ids(&g["prompt"]), expected.len(), true, &[])
        };
        let got = run_all(&mut engine, vec![r]).remove(&1).unwrap();
        eprintln!(
            "{name}: kiln {got:?}\n  llama.cpp with the adapter {expected:?}\n  without {:?}",
            ids(&without["greedy"][name]["ids"])
        );
        assert_eq!(got, expected, "{name}: greedy tokens through the adapter");
    }

    // Teacher forcing: the top-1 token at each position of the forced sequence, and the top
    // 20 log-probabilities after the chat prompt.
    let forced = ids(&want["forced"]);
    let chat_len = want["chat_len"].as_u64().unwrap() as usize;
    let scoring = Request {
        lora,
        prompt_logprobs: Some(1),
        ..greedy_request(1, forced.clone(), 1, true, &[])
    };
    // The top token of position p's prediction comes with the score of token p + 1.
    let mut top1 = Vec::new();
    engine.add_request(scoring).unwrap();
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).unwrap() {
            top1.extend(u.prompt_logprobs.iter().map(|t| t.top_logprobs[0].0));
        }
    }
    assert_eq!(top1.len(), forced.len() - 1);
    let theirs = ids(&with["forced_top1"]);
    let base = ids(&without["forced_top1"]);
    let positions = 0..top1.len();
    let agree = positions.clone().filter(|&p| top1[p] == theirs[p]).count();
    let moved = positions.clone().filter(|&p| base[p] != theirs[p]).count();
    let total = positions.len();

    let chat = Request {
        lora,
        sampling: SamplingParams {
            top_logprobs: 20,
            ..SamplingParams::greedy()
        },
        ..greedy_request(2, forced[..chat_len].to_vec(), 1, true, &[])
    };
    let got = run_sampled(&mut engine, vec![chat]).remove(&2).unwrap();
    let got = &got[0].top_logprobs;
    let top = &with["chat_top20"];
    let (top_ids, top_lp) = (ids(&top["ids"]), floats(&top["logprobs"]));
    let of = |list: &[(u32, f32)], id: u32| list.iter().find(|t| t.0 == id).map(|t| t.1);
    let mut worst = 0f32;
    for (&id, &lp) in top_ids.iter().zip(&top_lp).take(10) {
        let g = of(got, id).unwrap_or_else(|| panic!("token {id} not in kiln's top 20"));
        worst = worst.max((g - lp).abs());
    }
    let base_top = &without["chat_top20"];
    let base_lp: Vec<(u32, f32)> = ids(&base_top["ids"])
        .into_iter()
        .zip(floats(&base_top["logprobs"]))
        .collect();
    let effect = (top_ids.iter().zip(&top_lp))
        .filter_map(|(&id, &lp)| of(&base_lp, id).map(|b| (b - lp).abs()))
        .fold(0f32, f32::max);
    eprintln!(
        "teacher-forced top-1 equal to llama.cpp's through the adapter: {agree}/{total} \
         (the adapter changes llama.cpp's at {moved}); chat prompt's top 10 log-probabilities: \
         kiln vs llama.cpp {worst:.4}, the adapter's effect on llama.cpp's {effect:.3}"
    );
    assert!(agree * 100 >= 95 * total, "{agree}/{total}");
    assert!(
        moved > 0 && effect > 10.0 * worst.max(0.02),
        "{moved} {effect}"
    );
    assert!(worst < 0.02, "{worst}");
}
