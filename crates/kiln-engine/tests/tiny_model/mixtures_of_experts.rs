//! The families with a mixture of experts on the GPU against the CPU reference forward pass
//! ([`super::reference`]'s harness), as a Hugging Face folder and as GGUF: Qwen3 MoE, Mixtral,
//! OLMoE, Qwen2 MoE, GLM-4.5, ERNIE 4.5's MoE, GraniteMoeShared, dots.llm1 and Hunyuan's MoE;
//! gpt-oss as GGUF only, and at gpt-oss-20b's widths (ignored in the suite).

use super::reference::{check_folder_and_gguf, check_model_against_reference, tiny_gguf};
use super::*;
use kiln_model::RopeScaling;

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
