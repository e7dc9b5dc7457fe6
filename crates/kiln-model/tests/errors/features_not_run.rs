//! Options of architectures kiln runs that it does not run itself, refused by name where the
//! plain config or file loads: MPT's clipped q, k and v, biases and attention scales, dense
//! layers among experts and too many experts a token, GLM-4.5's grouped choice of experts
//! (its prediction layer is loaded past), Hunyuan's cross-layer attention.

use kiln_model::testing::{self, MetaValue, TinyConfig};
use kiln_model::{DType, Model, ModelConfig};

use super::{f32_gguf, tmp};

/// An MPT file whose q, k and v are clipped (`mpt.attention.clamp_kqv`, MPT's `clip_qkv`),
/// which kiln does not run: refused by name, where the same file without it loads.
#[test]
fn mpt_clipped_qkv_is_refused() {
    let mut b = f32_gguf(&TinyConfig::mpt());
    assert!(Model::from_gguf_bytes(b.to_bytes(), "mpt.gguf").is_ok());
    b.meta("mpt.attention.clamp_kqv", MetaValue::F32(6.0));
    let e = Model::from_gguf_bytes(b.to_bytes(), "mpt-clip.gguf")
        .err()
        .expect("must fail");
    assert!(
        e.to_string().contains("clamp_kqv") && e.to_string().contains("mpt-clip.gguf"),
        "{e}"
    );
}

/// Configs that put biases where kiln runs none (ERNIE 4.5's `use_bias`, Llama's `mlp_bias`,
/// Seed-OSS's `attention_out_bias`) and a GGUF attention scale other than 1/sqrt(head_dim)
/// are refused by name; the plain ones load.
#[test]
fn biases_and_scales_kiln_does_not_run_are_refused() {
    let dir = tmp("bias-flags");
    for (cfg, key, flag) in [
        (TinyConfig::ernie45(), "use_bias", "ERNIE 4.5 with use_bias"),
        (TinyConfig::default(), "mlp_bias", "mlp_bias"),
        (
            TinyConfig::seed_oss(),
            "attention_out_bias",
            "attention_out_bias",
        ),
    ] {
        testing::write_tiny_llama(&dir, &cfg, 1).unwrap();
        let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v[key] = serde_json::json!(false);
        ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("without the bias");
        v[key] = serde_json::json!(true);
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err(key);
        assert!(e.to_string().contains(flag), "{e}");
    }
    std::fs::remove_dir_all(&dir).ok();

    let mut b = f32_gguf(&TinyConfig::seed_oss());
    // 1/sqrt(16), the head size's own scale, is what every graph runs.
    b.meta("seed_oss.attention.scale", MetaValue::F32(0.25));
    assert!(Model::from_gguf_bytes(b.to_bytes(), "seed.gguf").is_ok());
    b.meta("seed_oss.attention.scale", MetaValue::F32(0.125));
    let e = Model::from_gguf_bytes(b.to_bytes(), "seed-scaled.gguf")
        .err()
        .expect("must fail");
    assert!(e.to_string().contains("seed_oss.attention.scale"), "{e}");
}

/// A Qwen3 MoE config with dense MLP layers among its experts' (which kiln does not run) is
/// refused by name; its GGUF file with more experts a token than it has, or than kiln runs,
/// by the numbers.
#[test]
fn experts_kiln_does_not_run_are_refused() {
    let dir = tmp("moe");
    testing::write_tiny_llama(&dir, &TinyConfig::qwen3_moe(), 1).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("every layer's experts");
    for (key, value) in [
        ("mlp_only_layers", serde_json::json!([1])),
        ("decoder_sparse_step", serde_json::json!(2)),
    ] {
        let mut v = v.clone();
        v[key] = value;
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err(key);
        assert!(e.to_string().contains("dense MLP layers"), "{e}");
    }
    for used in [6, 17] {
        let mut b = f32_gguf(&TinyConfig::qwen3_moe());
        b.meta("qwen3moe.expert_used_count", MetaValue::U32(used));
        let e = Model::from_gguf_bytes(b.to_bytes(), "moe.gguf")
            .err()
            .expect("must fail");
        assert!(e.to_string().contains(&format!("{used} a token")), "{e}");
    }
}

/// GLM-4.5's files carry a multi-token-prediction layer after the last (GGUF: counted in
/// `block_count`, `nextn_predict_layers` saying how many): loaded past, not run. Its choice of
/// experts within groups, per-head q/k norms and a gating other than sigmoid are refused by
/// name.
#[test]
fn glm4_moe_prediction_layer_is_skipped_and_its_variants_refused() {
    let mut b = f32_gguf(&TinyConfig::glm4_moe());
    b.meta("glm4moe.block_count", MetaValue::U32(4))
        .meta("glm4moe.nextn_predict_layers", MetaValue::U32(1))
        .tensor(
            "blk.3.nextn.eh_proj.weight",
            &[64, 128],
            &[0.0; 64 * 128],
            DType::F32,
        )
        .tensor("blk.3.attn_norm.weight", &[64], &[1.0; 64], DType::F32);
    let m = Model::from_gguf_bytes(b.to_bytes(), "glm.gguf").expect("the MTP layer skipped");
    assert_eq!(m.config.num_layers, 3);
    b.meta("glm4moe.expert_gating_func", MetaValue::U32(1));
    let e = Model::from_gguf_bytes(b.to_bytes(), "glm.gguf")
        .err()
        .expect("softmax gating");
    assert!(e.to_string().contains("gating function 1"), "{e}");

    let dir = tmp("glm4moe");
    testing::write_tiny_llama(&dir, &TinyConfig::glm4_moe(), 1).unwrap();
    let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("GLM-4.5's own");
    for (key, value, says) in [
        ("topk_group", 1, "within 1 of 4 groups"),
        ("use_qk_norm", 2, "use_qk_norm true"),
    ] {
        let mut v = v.clone();
        v["n_group"] = serde_json::json!(4);
        v["topk_group"] = serde_json::json!(4);
        v[key] = match value {
            2 => serde_json::json!(true),
            n => serde_json::json!(n),
        };
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err(key);
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// Hunyuan's cross-layer attention (layers sharing K/V) is refused by name, in its dense and
/// its mixture-of-experts configs.
#[test]
fn hunyuan_cross_layer_attention_is_refused() {
    for tc in [TinyConfig::hunyuan_dense(), TinyConfig::hunyuan_moe()] {
        let dir = tmp("hunyuan-cla");
        testing::write_tiny_llama(&dir, &tc, 1).unwrap();
        let json = std::fs::read_to_string(dir.join("config.json")).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        ModelConfig::from_hf_json(&v.to_string(), "config.json").expect("without");
        v["use_cla"] = serde_json::json!(true);
        let e = ModelConfig::from_hf_json(&v.to_string(), "config.json").expect_err("use_cla");
        assert!(e.to_string().contains("use_cla"), "{e}");
    }
}

/// OLMo's LayerNorms have no gain: a file that holds one for them is not the model kiln would
/// run, and is refused naming the tensor (by kiln's name, as GGUF errors name them); q, k and v clipped (`clip_qkv`, OLMo 1.7's) are
/// refused as on any model.
#[test]
fn olmo_with_norm_gains_or_clipping_is_refused() {
    let mut b = f32_gguf(&TinyConfig::olmo());
    assert!(Model::from_gguf_bytes(b.to_bytes(), "olmo.gguf").is_ok());
    b.meta("olmo.attention.clamp_kqv", MetaValue::F32(8.0));
    let e = Model::from_gguf_bytes(b.to_bytes(), "olmo-clip.gguf")
        .err()
        .expect("must fail");
    assert!(e.to_string().contains("clamp_kqv"), "{e}");
    let mut b = f32_gguf(&TinyConfig::olmo());
    b.tensor("blk.0.attn_norm.weight", &[64], &[1.0; 64], DType::F32);
    let e = Model::from_gguf_bytes(b.to_bytes(), "olmo-gain.gguf")
        .err()
        .expect("must fail");
    let e = e.to_string();
    assert!(
        e.contains("model.layers.0.input_layernorm.weight") && e.contains("olmo-gain.gguf"),
        "{e}"
    );
}
