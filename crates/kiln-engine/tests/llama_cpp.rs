//! kiln against llama.cpp on files made by llama.cpp's quantizer (Q4_K_M, Q5_K_M, Q6_K, Q8_0,
//! Q3_K_M, Q2_K, IQ4_XS and IQ4_NL versions of the default model; an MXFP4 one made by the
//! `gguf` package's). `scripts/llama-cpp-compare.sh` builds llama.cpp (PyPI
//! `llama-cpp-python`), makes the files and llama.cpp's outputs, then runs this test, which is
//! ignored otherwise: the llama.cpp build takes longer than the rest of CI together.
//!
//! On each file, kiln (the GPU kernel family, weights kept quantized, f32 KV cache) must match
//! the exact forward pass (kiln's CPU reference: weights dequantized by the code that is checked
//! against the `gguf` package, sums in f64) within 2e-3 on the chat prompt's logits. It prints
//! how many greedy tokens equal llama.cpp's and both logit differences. Against llama.cpp's
//! Vulkan backend in f32 (`scripts/llama-cpp-compare.sh --vulkan`), which computes what the
//! file holds, kiln must meet issue 9's bar: greedy tokens equal for 16 tokens on every
//! prompt, and llama.cpp's top-1 token at 95% or more of 64 teacher-forced positions. On the
//! CPU llama.cpp is not exact: its matrix products quantize the activations to 8 bits, which
//! moves these logits by up to about 1.1 (BENCHMARKS.md), so against it the test asks 85%
//! agreement only.

mod common;

use std::path::PathBuf;

use common::*;
use kiln_engine::{EngineConfig, KernelFamily, KvDtype, WeightStorage};
use kiln_gpu::reference::CpuModel;
use serde_json::Value;

/// The largest |a - b|, over `only`'s indices of `b` (with `a` in that order) or everywhere.
fn max_diff(a: &[f32], b: &[f32], only: Option<&[u32]>) -> f32 {
    match only {
        Some(idx) => a
            .iter()
            .zip(idx)
            .map(|(x, &i)| (x - b[i as usize]).abs())
            .fold(0f32, f32::max),
        None => a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max),
    }
}

#[test]
#[ignore = "needs llama.cpp's outputs: run scripts/llama-cpp-compare.sh"]
fn quantized_files_match_llama_cpp() {
    let dir = PathBuf::from(
        std::env::var("KILN_LLAMA_CPP_DIR").expect("KILN_LLAMA_CPP_DIR: llama.cpp's outputs"),
    );
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".llama-cpp.json"))
        .collect();
    runs.sort();
    assert!(
        !runs.is_empty(),
        "no llama.cpp outputs in {}",
        dir.display()
    );
    let ctx = gpu();
    for run in runs {
        let want: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
        let file = dir.join(want["file"].as_str().unwrap());
        let model = kiln_model::Model::load(&file).unwrap();
        let (_, types) = model.weights.stored_bytes();
        let mut engine = engine(
            &ctx,
            &model,
            EngineConfig {
                kernels: KernelFamily::Gpu,
                kv_dtype: KvDtype::F32,
                weights: WeightStorage::Quantized,
                ..small_config()
            },
        );
        let name = want["type"].as_str().unwrap();
        let exact_reference = want["backend"] == "vulkan-f32";

        // Greedy tokens: how many of the first 16 equal llama.cpp's, per prompt.
        let (mut greedy, mut greedy_equal) = (Vec::new(), true);
        for (prompt, g) in want["greedy"].as_object().unwrap() {
            let expected = ids(&g["ids"]);
            let out = run_all(
                &mut engine,
                vec![greedy_request(
                    1,
                    ids(&g["prompt"]),
                    expected.len(),
                    true,
                    &[],
                )],
            );
            let same = out[&1]
                .iter()
                .zip(&expected)
                .take_while(|(a, b)| a == b)
                .count();
            greedy_equal &= same == expected.len();
            greedy.push(format!("{prompt} {same}/{}", expected.len()));
        }

        // Teacher forcing: one token per step, the logits' argmax at each of the last 64
        // positions against llama.cpp's.
        let forced = ids(&want["forced"]["ids"]);
        let top1 = ids(&want["forced"]["top1"]);
        let table: Vec<u32> = (0..forced.len().div_ceil(kiln_core::BLOCK_SIZE) as u32).collect();
        let chat_len = ids(&want["greedy"]["chat"]["prompt"]).len();
        let (mut agree, mut total, mut chat_last) = (0, 0, Vec::new());
        for p in 0..forced.len() {
            let logits =
                pollster::block_on(engine.runner().logits(&chunk(&forced[p..p + 1], p, &table)))
                    .unwrap()
                    .remove(0);
            if p + 1 == chat_len {
                chat_last = logits.clone();
            }
            if p + 64 >= forced.len() {
                let argmax = (0..logits.len())
                    .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
                    .unwrap() as u32;
                total += 1;
                agree += (argmax == top1[p]) as usize;
            }
        }

        // The exact arithmetic: kiln's CPU forward pass (weights dequantized by the code checked
        // against the gguf package, f64 sums) on the chat prompt.
        let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
        let exact = cpu.forward(&forced[..chat_len]).pop().unwrap();
        let kiln_vs_exact = max_diff(&chat_last, &exact, None);
        let top = &want["chat_last_top20"];
        let llama: Vec<f32> = top["logits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let top_ids = ids(&top["ids"]);
        let llama_vs_exact = max_diff(&llama, &exact, Some(&top_ids));
        let types: Vec<String> = types.iter().map(|(t, n)| format!("{n} {t}")).collect();
        eprintln!(
            "{name} ({}), llama.cpp {}: greedy tokens equal to llama.cpp's: {}; teacher-forced top-1 {agree}/{total}; \
             chat prompt, largest logit difference: kiln vs exact {kiln_vs_exact:.5}, llama.cpp vs exact \
             {llama_vs_exact:.4} (its top 20)",
            types.join(", "),
            want["backend"].as_str().unwrap_or("cpu"),
            greedy.join(", ")
        );
        assert!(
            kiln_vs_exact < 2e-3,
            "{name}: kiln's logits differ from the exact forward pass by {kiln_vs_exact}"
        );
        assert!(
            greedy_equal || !exact_reference,
            "{name}: greedy tokens part from llama.cpp's ({})",
            greedy.join(", ")
        );
        let bar = if exact_reference { 95 } else { 85 };
        assert!(
            agree * 100 >= bar * total,
            "{name}: teacher-forced top-1 agreement with llama.cpp {agree}/{total} is under {bar}%"
        );
    }
}
