//! The rotary embedding's variants on the GPU against the CPU reference forward pass
//! ([`super::reference`]'s harness), as a Hugging Face folder and as GGUF: RoPE left out of
//! some layers (SmolLM3), linear scaling on Gemma 3's global layers, LongRoPE (Phi-3), a
//! partial rotary embedding (Phi-4-mini), Llama 3's scaling (Llama 3.2) and YaRN (Qwen3).

use super::reference::{
    check_against_reference, check_folder_and_gguf, check_model_against_reference, tiny_gguf,
};
use super::*;
use kiln_model::RopeScaling;

/// SmolLM3: Llama's layer, the fourth of four layers without RoPE (its rotary table all
/// zeros, so the fused rotary step writes q and k unrotated), as a Hugging Face folder (its
/// `no_rope_layers` flags) and as GGUF (q and k permuted as Llama's; no key: every fourth
/// layer, as llama.cpp reads it).
#[test]
fn logits_match_cpu_reference_smollm3() {
    let cfg = TinyConfig::smollm3();
    let (_dir, model) = tiny(&cfg, 7);
    assert_eq!(model.config.architecture, kiln_model::Architecture::SmolLM3);
    assert_eq!(model.config.no_rope_layers, [3]);
    check_model_against_reference("smollm3", &model);
    // Leaving the rotation out of one layer in four moves these logits by a few hundredths,
    // inside the f16 cache's tolerance above: with the f32 cache, both families' logits must
    // be far nearer the reference than the same model rotating on every layer.
    let ctx = gpu();
    let all = tokens(1, 45, model.config.vocab_size);
    let exact = CpuModel::load(&model.config, &model.weights).unwrap();
    let roped = kiln_model::ModelConfig {
        no_rope_layers: Vec::new(),
        ..model.config.clone()
    };
    let roped = CpuModel::load(&roped, &model.weights).unwrap();
    let (want, other) = (&exact.forward(&all)[44], &roped.forward(&all)[44]);
    let dist = |a: &[f32], b: &[f32]| {
        (a.iter().zip(b))
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    for family in FAMILIES {
        let mut engine = engine(&ctx, &model, on(config(16, false), family, KvDtype::F32));
        let got = pollster::block_on(engine.runner().logits(&chunk(&all, 0, &[5, 2, 7])))
            .unwrap()
            .remove(0);
        let (near, far) = (dist(&got, want), dist(&got, other));
        eprintln!(
            "smollm3 kernels {family}: {near:e} from the reference, {far:e} from it with RoPE on every layer"
        );
        assert!(
            near * 20.0 < far,
            "smollm3 kernels {family}: {near} from the reference, {far} from the rotated one"
        );
    }
    let (_gguf, model) = tiny_gguf(&cfg);
    assert_eq!(model.config.no_rope_layers, [3]);
    check_model_against_reference("smollm3 gguf", &model);
}

/// Gemma 3 4B and larger: linear RoPE scaling (factor 8) on the global layers only, the
/// sliding layers keeping their own base unscaled, as Hugging Face's `rope_scaling` of type
/// `linear` and as GGUF's `rope.scaling.type` `linear`.
#[test]
fn logits_match_cpu_reference_gemma3_linear_rope() {
    let cfg = TinyConfig {
        rope_scaling: Some(RopeScaling::Linear(8.0)),
        ..TinyConfig::gemma3()
    };
    let (_dir, model) = tiny(&cfg, 7);
    let c = &model.config;
    assert_eq!(c.rope_scaling, Some(RopeScaling::Linear(8.0)));
    let base = |theta: f64, i: usize| 1.0 / theta.powf(2.0 * i as f64 / c.head_dim as f64);
    let (sliding, global) = (c.layer_rope(0).inv_freq, c.layer_rope(1).inv_freq);
    for i in 0..c.head_dim / 2 {
        assert!((sliding[i] - base(10000.0, i)).abs() < 1e-12, "sliding");
        assert!((global[i] - base(1.0e6, i) / 8.0).abs() < 1e-12, "global");
    }
    check_model_against_reference("gemma3 linear rope", &model);
    let (_gguf, model) = tiny_gguf(&cfg);
    assert_eq!(model.config.rope_scaling, Some(RopeScaling::Linear(8.0)));
    check_model_against_reference("gemma3 linear rope gguf", &model);
}

/// Phi-3: q/k/v and gate/up fused into one tensor each (`qkv_proj`, `gate_up_proj`; GGUF
/// `attn_qkv`, `ffn_up`), and LongRoPE: the long factors (the context, 512, is past the original
/// 64) dividing each frequency, cos and sin scaled by sqrt(1 + ln 8 / ln 64). As a Hugging
/// Face folder and as GGUF (factors as `rope_factors_*` tensors).
#[test]
fn logits_match_cpu_reference_phi3() {
    let cfg = TinyConfig::phi3();
    check_folder_and_gguf("phi3", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Phi3);
        assert_eq!(c.rope_scaling, cfg.rope_scaling);
        assert!((c.layer_rope(0).attention_factor - 1.5f64.sqrt()).abs() < 1e-6);
    });
}

/// Phi-4-mini's shape: Phi-3 with a partial rotary embedding (12 of each head's 16
/// dimensions turn: the other 4 pass through, not scaled by LongRoPE's attention factor),
/// as a Hugging Face folder (`partial_rotary_factor` 0.75) and as GGUF (`rope.dimension_count`
/// 12). The GPU lays each head out as 6 turning pairs and 2 pairs whose table entries turn by
/// nothing; the CPU reference turns the first 12 dimensions of the checkpoint's order.
#[test]
fn logits_match_cpu_reference_phi4_mini_partial_rotary() {
    check_folder_and_gguf("phi4-mini", &TinyConfig::phi4_mini(), |c| {
        assert_eq!(c.partial_rotary_dim, Some(12));
        assert_eq!(c.layer_rope(0).inv_freq.len(), 6);
    });
}

/// Llama 3.2's shape of model: tied embeddings and Llama 3 RoPE scaling (factor 32, original
/// context 64, so the 50 positions here cross the scaled band of frequencies), as a Hugging
/// Face folder and as GGUF (`rope.scaling.*` metadata).
#[test]
fn logits_match_cpu_reference_llama32_rope_scaling() {
    let cfg = TinyConfig {
        tie_word_embeddings: true,
        rope_theta: 500000.0,
        rope_scaling: Some(RopeScaling::Llama3(kiln_model::Llama3Rope {
            factor: 32.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64,
        })),
        ..TinyConfig::default()
    };
    check_against_reference("llama3.2", &cfg);
    let (_gguf, model) = tiny_gguf(&cfg);
    assert_eq!(model.config.rope_scaling, cfg.rope_scaling);
    assert!(model.config.tie_word_embeddings);
    check_model_against_reference("llama3.2 gguf", &model);
}

/// YaRN, Qwen3's long-context setting (factor 4 over an original context of 64: each head's
/// first pair kept, pairs 0 to 5 ramping, the rest divided by 4; cos and sin times
/// 0.1 ln 4 + 1), as a Hugging Face folder (`rope_scaling` of type `yarn`) and as GGUF
/// (`rope.scaling.type` `yarn`, llama.cpp's keys).
#[test]
fn logits_match_cpu_reference_qwen3_yarn() {
    let cfg = TinyConfig::qwen3_yarn();
    check_folder_and_gguf("qwen3 yarn", &cfg, |c| {
        assert_eq!(c.rope_scaling, cfg.rope_scaling);
        let r = c.layer_rope(0);
        assert!((r.attention_factor - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-6);
        let plain = |i: usize| 1.0 / 10000f64.powf(2.0 * i as f64 / 32.0);
        assert_eq!(r.inv_freq[0], plain(0), "the fastest pair is kept");
        assert!(
            (r.inv_freq[15] - plain(15) / 4.0).abs() < 1e-15,
            "the slowest is stretched"
        );
    });
}
