use super::*;
use crate::testing::TinyConfig;

/// Layer 1 of the tiny model, its operations in short, and the model's tensor count.
fn layer(tc: TinyConfig) -> (Layer, String, usize) {
    let mut t = ModelTensors::for_config(&tc.model_config());
    let total = t.all().len();
    let l = t.layers.swap_remove(1);
    let short: Vec<String> = l
        .ops
        .iter()
        .map(|op| match op {
            Op::NormedProject {
                src,
                norm,
                weights,
                bias,
                dst,
            } => format!(
                "{} {}{} -> {dst:?}",
                match (src, norm) {
                    (Buf::Normed, _) => "layernormed",
                    (Buf::Proj, _) => "layernormed (second)",
                    (_, Some(_)) => "norm",
                    (_, None) => "raw",
                },
                weights.len(),
                if bias.is_some() { "+bias" } else { "" }
            ),
            Op::Rotary {
                qk_norm,
                norm_after,
            } => match (qk_norm.is_some(), norm_after) {
                (false, _) => "rotary".into(),
                (true, false) => "rotary+norm".into(),
                (true, true) => "rotary, then norm".into(),
            },
            Op::Attention { sinks } => match sinks {
                Some(_) => "attention+sinks".into(),
                None => "attention".into(),
            },
            Op::Project { src, dst, bias, .. } => format!(
                "{src:?} -> {dst:?}{}",
                if bias.is_some() { "+bias" } else { "" }
            ),
            Op::AddNormed { src, .. } => format!("+norm {src:?}"),
            Op::LayerNorm {
                dst: Buf::Normed, ..
            } => "layernorm".into(),
            Op::LayerNorm { dst, .. } => format!("layernorm -> {dst:?}"),
            Op::GatedActivation => "glu".into(),
            Op::Activation => "act".into(),
            Op::Experts(e) => format!(
                "experts {}{}{}{}",
                e.gate_up.len() / 2,
                if e.choice_bias.is_some() { "+bias" } else { "" },
                if e.shared_gate.is_some() { "+gate" } else { "" },
                match (&e.router_bias, &e.gate_up_bias, &e.down_bias) {
                    (Some(_), Some(_), Some(_)) => "+biases",
                    (None, None, None) => "",
                    _ => "+some biases",
                }
            ),
        })
        .collect();
    (l, short.join(", "), total)
}

#[test]
fn each_architecture_writes_its_layer() {
    let (l, ops, total) = layer(TinyConfig::default());
    assert_eq!(
        ops,
        "norm 3 -> Qkv, rotary, attention, Attn -> Residual, \
         norm 2 -> GateUp, glu, Act -> Residual"
    );
    assert_eq!(l.tensors().len(), 9);
    assert_eq!(total, 2 * 9 + 3);
    assert_eq!(
        l.tensors()[1].name,
        "model.layers.1.self_attn.q_proj.weight"
    );
    assert_eq!(l.tensors()[4].shape, [64, 64]);
    assert!(l.ops.iter().all(|op| !op.uses(Buf::Proj)));

    let (l, ops, _) = layer(TinyConfig::qwen2());
    assert!(ops.starts_with("norm 3+bias -> Qkv, rotary, attention"));
    assert_eq!(l.tensors()[5].shape, [32]);
    assert_eq!(l.tensors()[5].name, "model.layers.1.self_attn.k_proj.bias");

    // gpt-oss: biases on q, k, v and the output, sinks, experts with biases everywhere.
    let (l, ops, _) = layer(TinyConfig::gpt_oss());
    assert_eq!(
        ops,
        "norm 3+bias -> Qkv, rotary, attention+sinks, Attn -> Residual+bias, experts 6+biases"
    );
    let names: Vec<&str> = l.tensors().iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"model.layers.1.self_attn.sinks"));
    assert!(names.contains(&"model.layers.1.mlp.experts.5.down_proj.bias"));

    let (l, ops, _) = layer(TinyConfig::qwen3());
    assert!(ops.starts_with("norm 3 -> Qkv, rotary+norm, attention"));
    assert_eq!(l.tensors()[1].shape, [4 * 32, 64]);
    assert_eq!(l.tensors()[4].shape, [32]);

    let (l, ops, _) = layer(TinyConfig::gemma3());
    assert_eq!(
        ops,
        "norm 3 -> Qkv, rotary+norm, attention, Attn -> Proj, +norm Proj, \
         norm 2 -> GateUp, glu, Act -> Proj, +norm Proj"
    );
    let names: Vec<&str> = l.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 13);
    assert_eq!(names[7], "model.layers.1.post_attention_layernorm.weight");
    assert_eq!(names[8], "model.layers.1.pre_feedforward_layernorm.weight");
    assert!(l.ops.iter().any(|op| op.uses(Buf::Proj)));

    let (l, ops, _) = layer(TinyConfig::gemma2());
    assert_eq!(
        ops,
        "norm 3 -> Qkv, rotary, attention, Attn -> Proj, +norm Proj, \
         norm 2 -> GateUp, glu, Act -> Proj, +norm Proj"
    );
    assert_eq!(l.tensors().len(), 11);

    // Cohere: one LayerNorm both sub-layers read, side by side.
    let (l, ops, _) = layer(TinyConfig::cohere());
    assert_eq!(
        ops,
        "layernorm, layernormed 3 -> Qkv, rotary, attention, Attn -> Residual, \
         layernormed 2 -> GateUp, glu, Act -> Residual"
    );
    assert_eq!(l.tensors().len(), 8);
    assert!(l.ops.iter().any(|op| op.uses(Buf::Normed)));

    let (l, ops, _) = layer(TinyConfig::olmo2());
    assert_eq!(
        ops,
        "raw 3 -> Qkv, rotary+norm, attention, Attn -> Proj, +norm Proj, \
         raw 2 -> GateUp, glu, Act -> Proj, +norm Proj"
    );
    let t = l.tensors();
    assert_eq!(t.len(), 11);
    assert_eq!(
        (t[3].shape.as_slice(), t[4].shape.as_slice()),
        ([64].as_slice(), [32].as_slice())
    );

    let (l, ops, _) = layer(TinyConfig::phi3());
    assert!(ops.starts_with("norm 1 -> Qkv, rotary, attention"));
    assert_eq!(l.tensors().len(), 6);
    assert_eq!(l.tensors()[1].shape, [(4 + 2 * 2) * 16, 64]);
    assert_eq!(
        l.tensors()[4].name,
        "model.layers.1.mlp.gate_up_proj.weight"
    );

    let (l, ops, _) = layer(TinyConfig::hunyuan_dense());
    assert!(ops.starts_with("norm 3 -> Qkv, rotary, then norm, attention"));
    assert_eq!(
        l.tensors()[4].name,
        "model.layers.1.self_attn.query_layernorm.weight"
    );

    let (l, ops, _) = layer(TinyConfig::arcee());
    assert_eq!(
        ops,
        "norm 3 -> Qkv, rotary, attention, Attn -> Residual, \
         norm 1 -> Act, act, Act -> Residual"
    );
    assert_eq!(l.tensors()[6].name, "model.layers.1.mlp.up_proj.weight");

    // A shared expert's MLP around the routed experts, the norm read by both listed once.
    let (l, ops, _) = layer(TinyConfig::qwen2_moe());
    assert_eq!(
        ops,
        "norm 3+bias -> Qkv, rotary, attention, Attn -> Residual, \
         norm 2 -> GateUp, glu, experts 6+gate, Act -> Residual"
    );
    let names: Vec<&str> = l.tensors().iter().map(|t| t.name.as_str()).collect();
    let norm = "model.layers.1.post_attention_layernorm.weight";
    assert_eq!(names.iter().filter(|n| **n == norm).count(), 1);
    assert!(names.contains(&"model.layers.1.mlp.shared_expert_gate.weight"));
    let (l, ops, _) = layer(TinyConfig::glm4_moe());
    assert!(ops.ends_with("norm 2 -> GateUp, glu, experts 8+bias, Act -> Residual"));
    assert!(
        l.tensors()
            .iter()
            .any(|t| t.name.ends_with("e_score_correction_bias"))
    );
    // Without a shared expert in the config, the routed experts alone.
    let mut unshared = TinyConfig::hunyuan_moe().model_config();
    unshared.moe = unshared.moe.map(|m| crate::Moe { shared: None, ..m });
    let ops = &ModelTensors::for_config(&unshared).layers[1].ops;
    assert!(matches!(ops.last(), Some(Op::Experts(_))), "{ops:?}");
    let glm = ModelTensors::for_config(&TinyConfig::glm4_moe().model_config());
    assert!(
        !glm.layers[0]
            .ops
            .iter()
            .any(|op| matches!(op, Op::Experts(_)))
    );

    // A Llama whose config has attention_bias reads (and so requires) the biases.
    let mut biased = TinyConfig::default().model_config();
    biased.attention_bias = true;
    let t = ModelTensors::for_config(&biased);
    let names: Vec<&str> = t.layers[0]
        .tensors()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names[4], "model.layers.0.self_attn.q_proj.bias",
        "{names:?}"
    );

    let tied = TinyConfig {
        tie_word_embeddings: true,
        ..TinyConfig::default()
    };
    assert!(
        ModelTensors::for_config(&tied.model_config())
            .lm_head
            .is_none()
    );
}

/// GPT-NeoX: both LayerNorms taken of the stream before attention adds to it where the
/// sub-layers run side by side (the MLP's into a buffer of its own), one after the other
/// otherwise; q/k/v one product; biases everywhere.
#[test]
fn gpt_neox_takes_both_norms_first_when_side_by_side() {
    let (l, ops, total) = layer(TinyConfig::gpt_neox());
    assert_eq!(
        ops,
        "layernorm, layernorm -> Proj, layernormed 1+bias -> Qkv, rotary, attention, \
         Attn -> Residual+bias, layernormed (second) 1+bias -> Act, act, Act -> Residual+bias"
    );
    // Two LayerNorms (gain, bias), q/k/v, its output, and the MLP's two, each with a bias.
    assert_eq!(l.tensors().len(), 12);
    assert_eq!(total, 3 * 12 + 4);
    let (_, ops, _) = layer(TinyConfig::gpt_neox_sequential());
    assert_eq!(
        ops,
        "layernorm, layernormed 1+bias -> Qkv, rotary, attention, Attn -> Residual+bias, \
         layernorm, layernormed 1+bias -> Act, act, Act -> Residual+bias"
    );
}

/// Every GPT-NeoX tensor kiln reads has a Hugging Face name that maps back to it; names of
/// other families map to nothing.
#[test]
fn gpt_neox_names_map_both_ways() {
    let cfg = TinyConfig::gpt_neox().model_config();
    let t = ModelTensors::for_config(&cfg);
    for tensor in t.all() {
        let hf = gpt_neox::NAMES.hf_name(&tensor.name).expect(&tensor.name);
        assert!(
            hf.starts_with("gpt_neox.") || hf == "embed_out.weight",
            "{hf}"
        );
        assert_eq!(
            gpt_neox::NAMES.kiln_name(&hf).as_deref(),
            Some(tensor.name.as_str())
        );
    }
    assert_eq!(
        gpt_neox::NAMES
            .kiln_name("gpt_neox.layers.7.attention.query_key_value.bias")
            .as_deref(),
        Some("model.layers.7.self_attn.qkv_proj.bias")
    );
    assert_eq!(
        gpt_neox::NAMES.kiln_name("gpt_neox.layers.0.attention.rotary_emb.inv_freq"),
        None
    );
    assert!(gpt_neox::is_stored_buffer(
        "gpt_neox.layers.3.attention.masked_bias"
    ));
}

/// Falcon: GPT-NeoX's side-by-side layer on one LayerNorm (7B) or two (40B), no biases on the
/// products; its folders' names map both ways, `ln_attn`/`ln_mlp` where it has two.
#[test]
fn falcon_reads_one_or_two_norms() {
    let (_, ops, _) = layer(TinyConfig::falcon());
    assert_eq!(
        ops,
        "layernorm, layernormed 1 -> Qkv, rotary, attention, Attn -> Residual, \
         layernormed 1 -> Act, act, Act -> Residual"
    );
    let (_, ops, _) = layer(TinyConfig::falcon_40b());
    assert_eq!(
        ops,
        "layernorm, layernorm -> Proj, layernormed 1 -> Qkv, rotary, attention, \
         Attn -> Residual, layernormed (second) 1 -> Act, act, Act -> Residual"
    );
    for tc in [TinyConfig::falcon(), TinyConfig::falcon_40b()] {
        let cfg = tc.model_config();
        let names = NativeFolder::of(&cfg).unwrap().names;
        for tensor in ModelTensors::for_config(&cfg).all() {
            let hf = names.hf_name(&tensor.name).expect(&tensor.name);
            assert!(
                hf.starts_with("transformer.") || hf == "lm_head.weight",
                "{hf}"
            );
            assert_eq!(names.kiln_name(&hf).as_deref(), Some(tensor.name.as_str()));
        }
    }
    let two = NativeFolder::of(&TinyConfig::falcon_40b().model_config()).unwrap();
    assert_eq!(
        two.names
            .hf_name("model.layers.2.post_attention_layernorm.bias")
            .as_deref(),
        Some("transformer.h.2.ln_mlp.bias")
    );
}
