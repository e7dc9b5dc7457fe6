//! Sliding windows on the GPU against the CPU reference forward pass
//! ([`super::reference`]'s harness): Mistral's on every layer, as a Hugging Face folder and as
//! GGUF, and Qwen2's on the layers from `max_window_layers` on.

use super::reference::{check_against_reference, check_model_against_reference, tiny_gguf};
use super::*;

/// Mistral's sliding window (30 positions, so the 45-token prompt's last chunk and every decode
/// step see only part of the context; over two layers token 3 still reaches the decode
/// logits, which the sensitivity check needs), as a folder and as GGUF.
#[test]
fn logits_match_cpu_reference_sliding_window() {
    let cfg = TinyConfig {
        sliding_window: Some(30),
        ..TinyConfig::default()
    };
    check_against_reference("sliding window", &cfg);
    let (_gguf, model) = tiny_gguf(&cfg);
    assert_eq!(model.config.sliding_window, Some(30));
    check_model_against_reference("sliding window gguf", &model);
}

/// Qwen2's window on the layers from `max_window_layers` on (here layer 1 of 2; layer 0
/// attends to everything), from its Hugging Face folder. The window must change the logits
/// (the same weights with no window give others), so a kernel that ignored it would fail.
#[test]
fn logits_match_cpu_reference_qwen2_sliding_layers() {
    let cfg = TinyConfig {
        sliding_window: Some(20),
        first_sliding_layer: 1,
        ..TinyConfig::qwen2()
    };
    let (_dir, model) = tiny(&cfg, 7);
    let c = &model.config;
    assert_eq!((c.layer_window(0), c.layer_window(1)), (None, Some(20)));
    let all = tokens(1, 50, c.vocab_size);
    let windowed = CpuModel::load(c, &model.weights).unwrap().forward(&all);
    let global = kiln_model::ModelConfig {
        sliding_window: None,
        ..c.clone()
    };
    let unwindowed = CpuModel::load(&global, &model.weights)
        .unwrap()
        .forward(&all);
    let moved = (windowed[49].iter().zip(&unwindowed[49]))
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("qwen2 sliding layers: the window moves the last logits by {moved}");
    assert!(
        moved > 0.05,
        "the window moves the last logits by only {moved}"
    );
    check_model_against_reference("qwen2 sliding layers", &model);
}
