//! The families that normalize each sub-layer's output before it joins the residual stream,
//! on the GPU against the CPU reference forward pass ([`super::reference`]'s harness), as a
//! Hugging Face folder and as GGUF: Gemma 3 and Gemma 2 and GLM-4, with norms before the
//! sub-layers too, and OLMo 2, OLMo 3 and EXAONE 4, without them.

use super::reference::{check_folder_and_gguf, check_model_against_reference, tiny_gguf};
use super::*;

/// Gemma 3: norms after attention and after the MLP, GELU (tanh), embeddings scaled by
/// sqrt(64), q/k norms, tied embeddings, and a window of 12 on layers 1 and 3 (RoPE base 10000)
/// with layers 2 and 4 global (base 1e6), so the 50 positions here cross the window on the
/// sliding layers while token 3 still reaches the decode logits through the global ones. As a
/// Hugging Face folder (gains stored minus one, queries scaled by 1/sqrt(24)) and as GGUF.
#[test]
fn logits_match_cpu_reference_gemma3() {
    let cfg = TinyConfig::gemma3();
    let (_dir, model) = tiny(&cfg, 7);
    let c = &model.config;
    assert_eq!(c.architecture, kiln_model::Architecture::Gemma3);
    assert_eq!(
        (c.norm_gain_offset, c.query_pre_attn_scalar),
        (1.0, Some(24.0))
    );
    assert_eq!(
        (0..4).map(|i| c.layer_window(i)).collect::<Vec<_>>(),
        [Some(12), None, Some(12), None]
    );
    assert_eq!(
        (c.layer_rope_theta(0), c.layer_rope_theta(1)),
        (10000.0, 1.0e6)
    );
    assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
    check_model_against_reference("gemma3", &model);
    let (_gguf, model) = tiny_gguf(&cfg);
    assert_eq!(model.config.layer_window(3), None);
    assert_eq!(model.config.norm_gain_offset, 0.0);
    check_model_against_reference("gemma3 gguf", &model);
}

/// Gemma 2: Gemma 3's layer without q/k norms, every second layer sliding (one RoPE base),
/// attention scores soft-capped at 1 and logits at 2 (both well inside tanh's bend for this
/// model: its logits reach about 1.9 of the cap's 2). As a Hugging Face folder (with its
/// `layer_types` list) and as GGUF (no pattern in the file, as llama.cpp writes it: every
/// second layer global by default). The GPU runs both caps: the attention kernels' and the LM
/// head's epilogue.
#[test]
fn logits_match_cpu_reference_gemma2() {
    let cfg = TinyConfig::gemma2();
    let (_dir, model) = tiny(&cfg, 7);
    let c = &model.config;
    assert_eq!(c.architecture, kiln_model::Architecture::Gemma2);
    assert_eq!((c.attn_softcap, c.final_softcap), (Some(1.0), Some(2.0)));
    assert_eq!(
        (c.norm_gain_offset, c.query_pre_attn_scalar),
        (1.0, Some(24.0))
    );
    assert_eq!(
        (0..4).map(|i| c.layer_window(i)).collect::<Vec<_>>(),
        [Some(12), None, Some(12), None]
    );
    assert_eq!((c.layer_rope_theta(0), c.layer_rope_theta(1)), (1e4, 1e4));
    check_model_against_reference("gemma2", &model);
    let (_gguf, model) = tiny_gguf(&cfg);
    let c = &model.config;
    assert_eq!((c.attn_softcap, c.final_softcap), (Some(1.0), Some(2.0)));
    assert_eq!(
        (c.sliding_window_pattern, c.layer_window(2)),
        (Some(2), Some(12))
    );
    check_model_against_reference("gemma2 gguf", &model);
}

/// OLMo 2: q/k/v and gate/up read the residual stream unnormalized, each sub-layer's output
/// normalized into it, q and k each RMS-normalized as a whole (gains of 64 and 32 values) in
/// the rotary launch, as a Hugging Face folder and as GGUF (llama.cpp's `olmo2`:
/// `post_attention_norm`, `post_ffw_norm`, q/k rows not permuted).
#[test]
fn logits_match_cpu_reference_olmo2() {
    check_folder_and_gguf("olmo2", &TinyConfig::olmo2(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Olmo2);
        let features = c.features().join("; ");
        assert!(
            features.contains("q/k RMSNorm over all heads"),
            "{features}"
        );
        assert!(
            features.contains("no RMSNorm before attention"),
            "{features}"
        );
    });
}

/// OLMo 3: OLMo 2 with a window of 20 on three layers of four, as a Hugging Face folder
/// (`Olmo3ForCausalLM`, with YaRN on the global layer only, the sliding ones turning
/// unscaled) and as GGUF (`olmo2` with a sliding window, unscaled: a scaled one is refused).
#[test]
fn logits_match_cpu_reference_olmo3() {
    let yarn = TinyConfig {
        rope_scaling: TinyConfig::qwen3_yarn().rope_scaling,
        ..TinyConfig::olmo3()
    };
    let (dir, model) = tiny(&yarn, 7);
    let c = &model.config;
    assert_eq!((c.layer_window(2), c.layer_window(3)), (Some(20), None));
    assert_eq!(c.layer_rope(2).attention_factor, 1.0);
    assert!(c.layer_rope(3).attention_factor > 1.1);
    check_model_against_reference("olmo3 yarn", &model);
    check_folder_and_gguf("olmo3", &TinyConfig::olmo3(), |c| {
        assert_eq!(c.sliding_window_pattern, Some(4));
    });
    let gguf = dir.path().join("olmo3.gguf");
    kiln_model::testing::write_tiny_gguf(&gguf, &yarn, 7, kiln_model::DType::F32).unwrap();
    let Err(e) = kiln_model::Model::load(&gguf) else {
        panic!("a scaled OLMo 3 GGUF loaded");
    };
    assert!(e.to_string().contains("OLMo 3"), "{e}");
}

/// EXAONE 4: OLMo 2's norms with per-head q/k norms. As a Hugging Face folder with a window
/// (20 positions) on two of four layers, the other two global and without RoPE; as GGUF
/// without one (llama.cpp windows only the 64-layer size), every layer turning.
#[test]
fn logits_match_cpu_reference_exaone4() {
    let cfg = TinyConfig::exaone4();
    let (_dir, model) = tiny(&cfg, 7);
    let c = &model.config;
    assert_eq!(c.no_rope_layers, [1, 3]);
    assert_eq!((c.layer_window(0), c.layer_window(1)), (Some(20), None));
    assert!(c.layer_rope(1).inv_freq.is_empty());
    check_model_against_reference("exaone4 window", &model);
    let global = TinyConfig {
        sliding_window: None,
        ..cfg
    };
    check_folder_and_gguf("exaone4", &global, |c| {
        assert!(c.no_rope_layers.is_empty() && c.sliding_window.is_none());
        assert!(c.features().join("; ").contains("per-head q/k RMSNorm"));
    });
}

/// GLM-4: q/k/v biases, norms on both sub-layers' outputs, gate and up fused, and the rotary
/// embedding on the first 8 of each head's 16 dimensions, whose pairs the files store side
/// by side (`glm4` GGUF metadata and tensor names as llama.cpp's converter writes them).
#[test]
fn logits_match_cpu_reference_glm4() {
    check_folder_and_gguf("glm4", &TinyConfig::glm4(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Glm4);
        assert!(c.attention_bias && c.partial_rotary_dim == Some(8));
        let f = c.features().join("; ");
        assert!(
            f.contains("RMSNorm after attention and after the MLP"),
            "{f}"
        );
    });
}
