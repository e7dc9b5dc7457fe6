//! Each dense architecture without a module of its kind, on the GPU against the CPU reference
//! forward pass ([`super::reference`]'s harness), as a Hugging Face folder and as GGUF: Qwen2's
//! biases, Qwen3, Granite, MiniCPM, Cohere (Command-R, Command-R+ and Cohere 2), StableLM
//! (and StableLM 2 12B), Nemotron, StarCoder2, Phi-2, ERNIE 4.5, Seed-OSS, Arcee, Hunyuan
//! (dense), InternLM2, EXAONE 3 and OLMo.
//! (The families with norms after their sub-layers are in [`super::post_norm_families`], the
//! rotary embedding's variants in [`super::rotary`], sliding windows in
//! [`super::sliding_windows`], and the mixtures of experts in [`super::mixtures_of_experts`].)

use super::reference::{
    check_against_reference, check_folder_and_gguf, check_model_against_reference, tiny_gguf,
};
use super::*;

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

/// InternLM2: Llama's layer under its own names; as a Hugging Face folder, q, k and v one
/// tensor (`wqkv`) grouped by KV head (two queries, the key and the value of each), put in
/// kiln's order on load; as GGUF (`internlm2`), apart, q and k rows permuted as Llama's.
#[test]
fn logits_match_cpu_reference_internlm2() {
    let (_dir, model) = tiny(&TinyConfig::internlm2(), 7);
    assert_eq!(
        model.config.architecture,
        kiln_model::Architecture::InternLm2
    );
    assert!(model.config.fused_qkv && !model.config.attention_bias);
    check_model_against_reference("internlm2", &model);
    let (_gguf, model) = tiny_gguf(&TinyConfig::internlm2_gguf());
    assert_eq!(
        model.config.architecture,
        kiln_model::Architecture::InternLm2
    );
    assert!(!model.config.fused_qkv);
    check_model_against_reference("internlm2 gguf", &model);
}

/// EXAONE 3.5: Llama's layer under its own names, Llama 3's RoPE scaling, tied embeddings; as
/// a Hugging Face folder and as GGUF (`exaone`: its rotary halves as the folder keeps them).
#[test]
fn logits_match_cpu_reference_exaone() {
    check_folder_and_gguf("exaone", &TinyConfig::exaone(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Exaone);
        assert!(c.tie_word_embeddings && c.rope_scaling.is_some());
    });
}

/// OLMo: Llama's attention and gated MLP on LayerNorms without gain or bias (gains of one made
/// on load, its files holding none); as a Hugging Face folder and as GGUF (`olmo`).
#[test]
fn logits_match_cpu_reference_olmo() {
    check_folder_and_gguf("olmo", &TinyConfig::olmo(), |c| {
        assert_eq!(c.architecture, kiln_model::Architecture::Olmo);
        assert!(c.architecture.layer_norm() && c.architecture.norms_without_gain());
    });
}
