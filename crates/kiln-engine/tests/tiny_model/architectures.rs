//! Each architecture and feature on the GPU against the CPU reference forward pass
//! ([`super::reference`]'s harness), as a Hugging Face folder and as GGUF: Qwen2's biases and
//! windows, Qwen3, Gemma 2 and 3, SmolLM3, Phi-3 and Phi-4-mini, Granite, MiniCPM, Cohere
//! (and Cohere 2), StableLM, Nemotron, StarCoder2, Phi-2, OLMo 2 and 3, EXAONE 4, GLM-4,
//! ERNIE 4.5, Seed-OSS, Arcee, Hunyuan, Qwen3 MoE, Mixtral, OLMoE, Llama 3.2's RoPE scaling
//! and Mistral's window.

use super::reference::{
    check_against_reference, check_folder_and_gguf, check_model_against_reference, tiny_gguf,
};
use super::*;
use kiln_model::RopeScaling;

#[test]
fn logits_match_cpu_reference_qwen2_biases() {
    check_against_reference("qwen2", &TinyConfig::qwen2());
}

/// Qwen3: per-head q/k RMSNorm before the rotary embedding, no biases, head_dim 32 with 4 heads
/// in a hidden size of 64; as a Hugging Face folder and as a GGUF file (`qwen3` metadata,
/// `attn_q_norm` / `attn_k_norm` tensors).
#[test]
fn logits_match_cpu_reference_qwen3_qk_norm() {
    let cfg = TinyConfig::qwen3();
    check_against_reference("qwen3", &cfg);
    let (_gguf, model) = tiny_gguf(&cfg);
    assert_eq!(model.config.architecture, kiln_model::Architecture::Qwen3);
    check_model_against_reference("qwen3 gguf", &model);
}

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

/// Granite: Llama's layer with its four multipliers (embeddings times 3, attention scale 0.7,
/// sub-layer outputs times 1.6 into the residual stream, logits divided by 0.7), as a Hugging
/// Face folder and as GGUF (llama.cpp's `embedding_scale`, `attention.scale`,
/// `residual_scale`, `logit_scale`). The GPU scales the residual products and the logits in
/// the matrix kernels' epilogue.
#[test]
fn logits_match_cpu_reference_granite() {
    let cfg = TinyConfig::granite();
    check_folder_and_gguf("granite", &cfg, |c| {
        assert_eq!(c.granite, cfg.granite);
        assert_eq!((c.embed_scale(), c.attention_scale()), (3.0, 0.7));
    });
}

/// Cohere's Command-R: one LayerNorm (its own launch, into a buffer both sub-layers' products
/// read), attention and the MLP side by side, rotary pairs side by side in q and k (put half a
/// head apart on load), logits multiplied by `logit_scale`; as a Hugging Face folder and as
/// GGUF (`command-r`, whose epsilon is a LayerNorm's key).
#[test]
fn logits_match_cpu_reference_cohere() {
    let cfg = TinyConfig::cohere();
    check_folder_and_gguf("cohere", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Cohere);
        assert_eq!((c.logits_divisor(), c.rms_norm_eps), (0.5, 1e-5));
        assert!(c.tie_word_embeddings);
    });
}

/// Command-R+: Command-R's layer with each head of q and k LayerNorm'd before it turns, a
/// gain for each head (whose dimensions are side by side as q's rows are, put back with them);
/// as a Hugging Face folder (`use_qk_norm`) and as GGUF (`attn_q_norm`, `attn_k_norm`).
#[test]
fn logits_match_cpu_reference_command_r_plus() {
    let cfg = TinyConfig::command_r_plus();
    check_folder_and_gguf("command-r+", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Cohere);
        assert!(c.qk_layer_norm);
        let f = c.features().join("; ");
        assert!(f.contains("per-head q/k LayerNorm"), "{f}");
    });
}

/// Command R7B's shape (`cohere2`): Command-R's layer with a window on three layers of four
/// and no RoPE on the fourth, as a Hugging Face folder (`layer_types`) and as GGUF (the
/// pattern fixed, as llama.cpp runs it).
#[test]
fn logits_match_cpu_reference_cohere2() {
    let cfg = TinyConfig::cohere2();
    check_folder_and_gguf("cohere2", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Cohere2);
        assert_eq!(c.no_rope_layers, [3]);
        assert_eq!((c.layer_window(0), c.layer_window(3)), (Some(20), None));
    });
}

/// StableLM: LayerNorms with biases (each its own launch into the buffer the next product
/// reads; the final one's bias added with the sampled rows' norm), q/k/v biases and a rotary
/// embedding on a quarter of each head, as a Hugging Face folder and as GGUF (`stablelm`,
/// `rope.dimension_count` 4).
#[test]
fn logits_match_cpu_reference_stablelm() {
    let cfg = TinyConfig::stablelm();
    check_folder_and_gguf("stablelm", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::StableLm);
        assert_eq!((c.partial_rotary_dim, c.attention_bias), (Some(4), true));
    });
}

/// Nemotron: StableLM's LayerNorms (their gains stored minus one in the folder, whole in
/// GGUF, as llama.cpp's converter writes them), half of each head turning, and a MLP without
/// a gate (relu(up x)^2 in the up product's epilogue).
#[test]
fn logits_match_cpu_reference_nemotron() {
    let cfg = TinyConfig::nemotron();
    check_folder_and_gguf("nemotron", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Nemotron);
        assert_eq!(c.partial_rotary_dim, Some(8));
        assert_eq!(c.activation, kiln_model::Activation::Relu2);
    });
}

/// StarCoder2: LayerNorms with biases, biases on every projection (into the residual stream
/// too), a MLP without a gate whose GELU is a launch of its own, and a window of 48 on every
/// layer; as a Hugging Face folder and as GGUF (`starcoder2`, its MLP under llama.cpp's
/// `ffn_up`/`ffn_down`).
#[test]
fn logits_match_cpu_reference_starcoder2() {
    let cfg = TinyConfig::starcoder2();
    check_folder_and_gguf("starcoder2", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Starcoder2);
        assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
        assert_eq!((c.layer_window(0), c.attention_bias), (Some(48), true));
    });
}

/// Phi-2: one LayerNorm with a bias read by attention and a GELU MLP side by side, biases on
/// every product and on the LM head, the final norm under its own name, 8 of each head's 20
/// dimensions turning; as a Hugging Face folder and as GGUF (`phi2`, its attention output and
/// MLP under llama.cpp's `attn_output`, `ffn_up` and `ffn_down`, the LM head's bias as
/// `output.bias`).
#[test]
fn logits_match_cpu_reference_phi2() {
    let cfg = TinyConfig::phi2();
    check_folder_and_gguf("phi2", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Phi2);
        assert_eq!(c.activation, kiln_model::Activation::GeluTanh);
        assert_eq!((c.partial_rotary_dim, c.attention_bias), (Some(8), true));
        let t = kiln_model::ModelTensors::for_config(c);
        assert_eq!(t.final_norm.name, "model.final_layernorm.weight");
        assert!(t.lm_head_bias.is_some());
    });
}

/// Phi-2 as the GGUF files converted from its first release hold it: q, k and v, and their
/// biases, in one `attn_qkv` tensor each.
#[test]
fn logits_match_cpu_reference_phi2_fused_qkv() {
    let cfg = TinyConfig {
        fused_qkv: true,
        ..TinyConfig::phi2()
    };
    let (_gguf, model) = tiny_gguf(&cfg);
    assert!(model.config.fused_qkv && model.config.attention_bias);
    assert!(
        model
            .weights
            .contains("model.layers.2.self_attn.qkv_proj.bias")
    );
    check_model_against_reference("phi2 fused qkv gguf", &model);
}

/// StableLM 2 12B: StableLM's LayerNorm before attention and the MLP side by side, each head
/// of q and k LayerNorm'd with a gain of its own; as a Hugging Face folder (a gain tensor a
/// head, stacked on load) and as GGUF (`attn_q_norm`, `attn_k_norm`, no `ffn_norm`).
#[test]
fn logits_match_cpu_reference_stablelm2_12b() {
    let cfg = TinyConfig::stablelm2_12b();
    check_folder_and_gguf("stablelm2-12b", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::StableLm);
        assert!(c.qk_layer_norm && c.parallel_residual);
    });
}

/// MiniCPM: Granite's layer, its multipliers worked out from MiniCPM's own keys as a Hugging
/// Face folder (`scale_emb`, `scale_depth`, `dim_model_base`) and read as llama.cpp's
/// converter writes them into GGUF (`embedding_scale`, `residual_scale`, `logit_scale`, no
/// attention scale: the usual 1/sqrt(head_dim)).
#[test]
fn logits_match_cpu_reference_minicpm() {
    let cfg = TinyConfig::minicpm();
    check_folder_and_gguf("minicpm", &cfg, |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::MiniCpm);
        assert_eq!(c.granite, cfg.granite);
        assert_eq!((c.embed_scale(), c.attention_scale()), (2.5, 0.25));
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

/// ERNIE 4.5: Llama's layer with each head's rotary pairs side by side in the stored q and k
/// rows, as its Hugging Face folders and llama.cpp's `ernie4_5` GGUF files keep them.
#[test]
fn logits_match_cpu_reference_ernie45() {
    check_folder_and_gguf("ernie4_5", &TinyConfig::ernie45(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Ernie45);
        assert!(!c.attention_bias && c.tie_word_embeddings);
        let f = c.features().join("; ");
        assert!(f.contains("rotary pairs side by side"), "{f}");
    });
}

/// Seed-OSS: q/k/v biases, and (as GGUF) the norm before the MLP under llama.cpp's
/// `post_attention_norm`.
#[test]
fn logits_match_cpu_reference_seed_oss() {
    check_folder_and_gguf("seed_oss", &TinyConfig::seed_oss(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::SeedOss);
        assert!(c.attention_bias);
    });
}

/// Arcee: a MLP without a gate, relu(x)^2 in the up product's epilogue (llama.cpp's `arcee`
/// GGUF: q and k rows permuted as Llama's, no `ffn_gate`).
#[test]
fn logits_match_cpu_reference_arcee() {
    check_folder_and_gguf("arcee", &TinyConfig::arcee(), |c| {
        assert_eq!(c.activation, kiln_model::Activation::Relu2);
        assert!(c.features().join("; ").contains("without a gate"));
    });
}

/// Hunyuan (dense): per-head q/k norms after the rotary embedding (the separate rotary launch
/// in its third mode), and a RoPE base stretched by an NTK alpha in the folder (stored
/// stretched in GGUF, as llama.cpp's converter writes it).
#[test]
fn logits_match_cpu_reference_hunyuan_dense() {
    check_folder_and_gguf("hunyuan-dense", &TinyConfig::hunyuan_dense(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::HunyuanDense);
        assert!((c.rope_theta - 100.0).abs() < 1e-3, "{}", c.rope_theta);
        let f = c.features().join("; ");
        assert!(f.contains("after the rotary embedding"), "{f}");
    });
}

/// Qwen3 MoE: 5 experts a layer, 2 a token, through the router's launch and the experts'
/// products (gate/up into each chosen expert's activations, down weighted into the residual
/// stream); as GGUF, each kind of the experts' matrices stacked in one tensor of three
/// dimensions, as llama.cpp's converter writes them.
#[test]
fn logits_match_cpu_reference_qwen3_moe() {
    check_folder_and_gguf("qwen3-moe", &TinyConfig::qwen3_moe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Qwen3Moe);
        assert_eq!(c.mlp_width(), 0, "no MLP outside the experts");
        assert_eq!(
            c.moe.map(|m| (m.experts, m.experts_per_token)),
            Some((5, 2))
        );
        let f = c.features().join("; ");
        assert!(
            f.contains("mixture of experts: 5 experts of 64, 2 a token"),
            "{f}"
        );
    });
}

/// Mixtral: 4 experts of the MLP's size, 2 a token, under Mixtral's names (`w1`, `w3`, `w2`);
/// as GGUF, a `llama` file with experts (q and k permuted as Llama's).
#[test]
fn logits_match_cpu_reference_mixtral() {
    check_folder_and_gguf("mixtral", &TinyConfig::mixtral(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Mixtral);
        assert_eq!(c.moe.map(|m| m.experts), Some(4));
    });
}

/// OLMoE: q and k normalized whole, 6 experts, 3 a token, their weights not renormalized.
#[test]
fn logits_match_cpu_reference_olmoe() {
    check_folder_and_gguf("olmoe", &TinyConfig::olmoe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Olmoe);
        assert_eq!(c.moe.map(|m| m.normalize), Some(false));
    });
}

/// Qwen2 MoE: Qwen2's biases, 6 experts of 32, 2 a token, not renormalized, and a shared
/// expert of 192 (wider than the model's MLP) that every token runs, scaled by the sigmoid of
/// its gate, a row the router's product computes after the experts' (GGUF: llama.cpp's
/// `ffn_*_shexp` tensors and the gate as a vector).
#[test]
fn logits_match_cpu_reference_qwen2_moe() {
    check_folder_and_gguf("qwen2-moe", &TinyConfig::qwen2_moe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Qwen2Moe);
        assert!(c.attention_bias);
        assert_eq!(c.mlp_width(), 192);
        let f = c.features().join("; ");
        assert!(f.contains("a shared expert of 192, gated"), "{f}");
    });
}

/// GLM-4.5: the first of three layers dense, then 8 experts of 32, 3 a token, chosen by
/// sigmoid scores plus each expert's bias and weighted by the scores renormalized times 2.5,
/// and an ungated shared expert; half of each head turning, q/k/v biases (GGUF: `glm4moe`
/// with `exp_probs_b`, the leading dense block count and the weights' scale).
#[test]
fn logits_match_cpu_reference_glm4_moe() {
    check_folder_and_gguf("glm4-moe", &TinyConfig::glm4_moe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Glm4Moe);
        assert_eq!(c.mlp_width(), 160, "layer 0's dense MLP");
        let m = c.moe.unwrap();
        assert_eq!(
            (m.scoring, m.scale, m.first_layer),
            (kiln_model::Scoring::Sigmoid, 2.5, 1)
        );
        assert_eq!(c.partial_rotary_dim, Some(8));
        let f = c.features().join("; ");
        assert!(f.contains("sigmoid"), "{f}");
    });
}

/// ERNIE 4.5's MoE: the first of three layers dense, then 6 experts of 32, 2 a token, chosen
/// by softmax scores plus each expert's bias (a row in the folder, a vector in GGUF) and
/// renormalized, with a shared expert of two experts' size; rotary pairs side by side.
#[test]
fn logits_match_cpu_reference_ernie45_moe() {
    check_folder_and_gguf("ernie45-moe", &TinyConfig::ernie45_moe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Ernie45Moe);
        let m = c.moe.unwrap();
        assert!(m.choice_bias && m.scoring == kiln_model::Scoring::Softmax);
        assert_eq!(m.shared.map(|s| s.intermediate_size), Some(64));
    });
}

/// GraniteMoeShared: Granite's multipliers (the experts' and the shared expert's outputs
/// scaled as any sub-layer's), 4 experts of the MLP's size, 2 a token, and a shared expert;
/// the folder stacks the experts' matrices in three dimensions and the shared expert's gate
/// and up in one (`input_linear`), as Granite's files do; GGUF splits them as llama.cpp's
/// converter does.
#[test]
fn logits_match_cpu_reference_granite_moe() {
    check_folder_and_gguf("granite-moe", &TinyConfig::granite_moe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::GraniteMoe);
        assert_eq!(c.granite.map(|g| g.residual), Some(1.6));
        assert_eq!(c.mlp_width(), 96);
    });
}

/// dots.llm1: Qwen3's per-head q/k norms and GLM-4.5's sigmoid routing (not renormalized
/// here, times 2.5) with a shared expert of two experts' size, the first layer dense.
#[test]
fn logits_match_cpu_reference_dots1() {
    check_folder_and_gguf("dots1", &TinyConfig::dots1(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Dots1);
        let m = c.moe.unwrap();
        assert!(!m.normalize && m.choice_bias && m.first_layer == 1);
        let f = c.features().join("; ");
        assert!(f.contains("per-head q/k RMSNorm"), "{f}");
    });
}

/// Hunyuan's MoE: Hunyuan's attention (norms after the rotary embedding, its NTK alpha), 6
/// experts of 32, 2 a token, renormalized, and a shared expert of the MLP's size; its folder
/// gives the experts a token and their size a layer at a time, as Hunyuan-A13B's does.
#[test]
fn logits_match_cpu_reference_hunyuan_moe() {
    check_folder_and_gguf("hunyuan-moe", &TinyConfig::hunyuan_moe(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::HunyuanMoe);
        assert!((c.rope_theta - 100.0).abs() < 1e-3, "{}", c.rope_theta);
        assert_eq!(
            c.moe.and_then(|m| m.shared).map(|s| s.intermediate_size),
            Some(160)
        );
    });
}

/// gpt-oss, as GGUF (llama.cpp's `gpt-oss`; kiln reads no gpt-oss folder): q/k/v and output
/// biases, a sink per head (`attn_sinks.weight`) in every attention kernel, layers 0 and 2
/// sliding over 12 positions (shorter than the 45-token prompt) and the others global, YaRN;
/// 6 experts of 32, 2 a token, with the router's bias (`ffn_gate_inp.bias`), each expert's
/// biases on gate, up and down (`ffn_*_exps.bias`, experts x rows) and the clamped SwiGLU.
#[test]
fn logits_match_cpu_reference_gpt_oss() {
    let cfg = TinyConfig {
        num_layers: 3,
        ..TinyConfig::gpt_oss()
    };
    let (gguf, model) = tiny_gguf(&cfg);
    let c = &model.config;
    assert_eq!(c.architecture, kiln_model::Architecture::GptOss);
    assert_eq!(c.activation, kiln_model::Activation::ClampedSwiglu);
    let windows: Vec<_> = (0..3).map(|i| c.layer_window(i)).collect();
    assert_eq!(windows, [Some(12), None, Some(12)]);
    assert!(matches!(c.rope_scaling, Some(RopeScaling::Yarn(_))));
    assert_eq!(
        c.moe.map(|m| (m.experts, m.experts_per_token, m.normalize)),
        Some((6, 2, true))
    );
    let path = gguf.path().join("tiny.gguf");
    let bytes = std::fs::read(&path).unwrap();
    let header = kiln_model::gguf::reader::parse_header(&bytes, "tiny.gguf").unwrap();
    let names: Vec<&str> = header.tensors.iter().map(|t| t.name.as_str()).collect();
    for n in [
        "blk.1.attn_sinks.weight",
        "blk.1.attn_output.bias",
        "blk.1.ffn_gate_inp.bias",
        "blk.1.ffn_up_exps.bias",
        "blk.1.post_attention_norm.weight",
    ] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    let f = c.features().join("; ");
    assert!(f.contains("attention sinks"), "{f}");
    check_model_against_reference("gpt-oss gguf", &model);
}

/// gpt-oss-20b's layer at its own widths (hidden 2880, 64 query heads and 8 KV heads of
/// 64: sinks for 64 heads, MXFP4 matrices as its files' experts are) with 4 experts of 2880,
/// 2 a token, over two layers (one sliding over 128 positions, the prompt shorter): the GPU
/// against the CPU reference. Ignored in the suite for its time (run it by name).
#[test]
#[ignore]
fn logits_match_cpu_reference_gpt_oss_20b_widths() {
    let cfg = TinyConfig {
        hidden_size: 2880,
        intermediate_size: 2880,
        num_heads: 64,
        num_kv_heads: 8,
        head_dim: 64,
        sliding_window: Some(128),
        rope_theta: 150000.0,
        moe: Some(kiln_model::Moe::softmax(4, 2, 2880, true)),
        ..TinyConfig::gpt_oss()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpt-oss-widths.gguf");
    kiln_model::testing::write_tiny_gguf(&path, &cfg, 7, kiln_model::DType::MXFP4).unwrap();
    let model = kiln_model::Model::load(&path).unwrap();
    let name = "model.layers.1.mlp.experts.3.down_proj.weight";
    assert_eq!(model.weights.dtype(name).unwrap(), kiln_model::DType::MXFP4);
    check_model_against_reference("gpt-oss-20b widths", &model);
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
