//! kiln's CPU reference forward pass against Hugging Face transformers, on the tiny random
//! folders of `kiln_model::testing::transformers_cases` (every architecture kiln runs, and each
//! RoPE scaling, window rule, bias and norm that changes its forward pass). The logits come
//! from `tests/reference/tiny-transformers.json`, made by `scripts/transformers_reference.py`
//! (transformers in float32, eager attention). The GPU runner is checked against this same
//! reference on the same shapes (kiln-engine's `tiny_model` tests), so this closes the loop
//! from the GPU to the implementation the real models were trained with. Needs no GPU.

use std::path::Path;

use kiln_gpu::reference::CpuModel;
use kiln_model::testing::{KILN_GGUF, transformers_cases, write_transformers_case};
use kiln_model::{Architecture, GraniteScales, Model, ModelConfig, RopeScaling, Yarn};
use serde_json::Value;

fn fixture() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/reference/tiny-transformers.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Tolerance: the weights are f16 on both sides (so identical), transformers accumulates in
/// f32 and the reference in f64, and the file keeps 6 significant digits: the measured
/// differences are 5e-6 (2.3e-5 for Gemma 3, whose logits reach 3.5), so
/// `1e-4 + 1e-4 * |logit|` leaves 5-20x headroom. The test checks that what it is there to
/// catch moves the logits by ten times the tolerance and more: one changed early token
/// (except where every layer's window has left it behind, as with Mistral's, where it must
/// not move them at all), and each soft cap, the layers without RoPE, the partial rotary
/// embedding, GPT-NeoX's order of sub-layers, Falcon 40B's second LayerNorm, each RoPE scaling (and YaRN's factor on cos and
/// sin) and each of Granite's multipliers left out (MiniCPM's too, but its attention scale, which is the plain one).
#[test]
fn cpu_reference_matches_transformers() {
    let fx = fixture();
    let positions: Vec<usize> = fx["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap() as usize)
        .collect();
    let cases = transformers_cases();
    assert_eq!(
        cases.len(),
        fx["cases"].as_object().unwrap().len(),
        "the fixture's cases and transformers_cases() differ: rerun scripts/transformers_reference.py"
    );
    for (name, cfg) in cases {
        let case = &fx["cases"][name];
        assert!(
            case.is_object(),
            "{name}: not in the fixture: rerun scripts/transformers_reference.py"
        );
        let dir = tempfile::tempdir().unwrap();
        write_transformers_case(dir.path(), &cfg).unwrap();
        let bytes = std::fs::read(dir.path().join("model.safetensors")).unwrap();
        assert_eq!(
            u64::from(crc32fast::hash(&bytes)),
            case["crc32"].as_u64().unwrap(),
            "{name}: the tiny model's weights are not those transformers ran: rerun \
             scripts/transformers_reference.py"
        );
        // gpt-oss from the GGUF file of the same values beside its folder (kiln reads no
        // gpt-oss folder); the others from the folder, whose config.json as transformers
        // writes it (its own format, RoPE entries in `rope_parameters`) reads as the same
        // model (the sampling defaults come from generation_config.json; transformers fills
        // in its class's default BOS id). MiniCPM's ran as the Granite its keys make, and
        // InternLM2's as the Llama its tensors make (q, k and v apart), whose configs must
        // read as the same model but for the architecture's name (and InternLM2's fused
        // q, k and v).
        let model = if cfg.architecture == Architecture::GptOss {
            Model::load(&dir.path().join(KILN_GGUF)).unwrap()
        } else {
            let model = Model::load(dir.path()).unwrap();
            let saved = ModelConfig::from_hf_json(&case["saved_config"].to_string(), name)
                .unwrap_or_else(|e| panic!("{name}: transformers' own config.json: {e}"));
            let stand_in = match cfg.architecture {
                Architecture::MiniCpm => Some(Architecture::Granite),
                Architecture::InternLm2 => Some(Architecture::Llama),
                _ => None,
            };
            if let Some(a) = stand_in {
                assert_eq!(saved.architecture, a, "{name}");
            }
            let fused_qkv = match cfg.architecture {
                Architecture::InternLm2 => model.config.fused_qkv,
                _ => saved.fused_qkv,
            };
            assert_eq!(
                ModelConfig {
                    architecture: model.config.architecture,
                    fused_qkv,
                    generation: model.config.generation,
                    bos_token_id: model.config.bos_token_id,
                    ..saved
                },
                model.config,
                "{name}: transformers' own config.json"
            );
            model
        };
        let cpu = CpuModel::load(&model.config, &model.weights).unwrap();
        let tokens: Vec<u32> = case["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect();
        let got = cpu.forward(&tokens);
        let mut worst = 0f32;
        for (row, &p) in case["logits"].as_array().unwrap().iter().zip(&positions) {
            let want = floats(row);
            assert_eq!(want.len(), got[p].len(), "{name}: vocabulary");
            for (i, (g, w)) in got[p].iter().zip(&want).enumerate() {
                let d = (g - w).abs();
                worst = worst.max(d);
                assert!(
                    d <= 1e-4 + 1e-4 * w.abs(),
                    "{name}: position {p}, logit {i}: kiln {g}, transformers {w}"
                );
            }
        }
        // Each soft cap and the layers without RoPE must matter, and one changed early token:
        // each moves the logits far outside the tolerance (10 times its largest here).
        let c = &model.config;
        let p = *positions.last().unwrap();
        let far = 10.0 * (1e-4 + 1e-4 * got[p].iter().fold(0f32, |m, v| m.max(v.abs())));
        let mut without = Vec::new();
        if c.attn_softcap.is_some() {
            without.push((
                "the attention soft cap",
                ModelConfig {
                    attn_softcap: None,
                    ..c.clone()
                },
            ));
        }
        if c.final_softcap.is_some() {
            without.push((
                "the logit soft cap",
                ModelConfig {
                    final_softcap: None,
                    ..c.clone()
                },
            ));
        }
        if !c.no_rope_layers.is_empty() {
            without.push((
                "the layers without RoPE",
                ModelConfig {
                    no_rope_layers: Vec::new(),
                    ..c.clone()
                },
            ));
        }
        if let Some(g) = c.granite {
            let plain_attention = 1.0 / (c.head_dim as f32).sqrt();
            for (what, one) in [
                (
                    "Granite's embedding multiplier",
                    GraniteScales {
                        embedding: 1.0,
                        ..g
                    },
                ),
                (
                    "Granite's attention multiplier",
                    GraniteScales {
                        attention: plain_attention,
                        ..g
                    },
                ),
                (
                    "Granite's residual multiplier",
                    GraniteScales { residual: 1.0, ..g },
                ),
                (
                    "Granite's logit divisor",
                    GraniteScales { logits: 1.0, ..g },
                ),
            ] {
                // MiniCPM's attention scale is the plain one.
                if one == g {
                    continue;
                }
                let granite = Some(one);
                without.push((
                    what,
                    ModelConfig {
                        granite,
                        ..c.clone()
                    },
                ));
            }
        }
        if let Some(s) = &c.rope_scaling {
            without.push((
                "the RoPE scaling",
                ModelConfig {
                    rope_scaling: None,
                    ..c.clone()
                },
            ));
            if let RopeScaling::Yarn(y) = s {
                let plain = Yarn {
                    attention_factor: 1.0,
                    ..*y
                };
                without.push((
                    "YaRN's factor on cos and sin",
                    ModelConfig {
                        rope_scaling: Some(RopeScaling::Yarn(plain)),
                        ..c.clone()
                    },
                ));
            }
        }
        if c.partial_rotary_dim.is_some() {
            // Every dimension turning (the LongRoPE divisors of the added pairs 1).
            let mut full = ModelConfig {
                partial_rotary_dim: None,
                ..c.clone()
            };
            if let Some(RopeScaling::LongRope(r)) = &mut full.rope_scaling {
                r.short_factor.resize(c.head_dim / 2, 1.0);
                r.long_factor.resize(c.head_dim / 2, 1.0);
            }
            without.push(("the partial rotary embedding", full));
        }
        if c.alibi.is_some() {
            without.push((
                "ALiBi's biases",
                ModelConfig {
                    alibi: None,
                    ..c.clone()
                },
            ));
        }
        if c.architecture == Architecture::Falcon && c.mlp_norm {
            without.push((
                "the MLP's own LayerNorm",
                ModelConfig {
                    mlp_norm: false,
                    ..c.clone()
                },
            ));
        }
        if c.architecture == Architecture::GptNeox {
            // (Both orders read the same tensors.)
            without.push((
                "its order of sub-layers",
                ModelConfig {
                    parallel_residual: !c.parallel_residual,
                    ..c.clone()
                },
            ));
        }
        for (what, other) in without {
            let cpu = CpuModel::load(&other, &model.weights).unwrap();
            let off = (cpu.forward(&tokens)[p].iter())
                .zip(&got[p])
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                off > far,
                "{name}: without {what} the logits move by only {off}"
            );
            eprintln!("{name}: without {what} the last logits move by {off:e}");
        }
        let mut other = tokens.clone();
        other[1] = (other[1] + 1) % model.config.vocab_size as u32;
        let alt = cpu.forward(&other);
        let moved = alt[p]
            .iter()
            .zip(&got[p])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "{name}: worst |kiln - transformers| {worst:e} over {} positions; token 1 changed moves the last position by {moved:e}",
            positions.len()
        );
        // Each layer's window reaches `w - 1` positions further back than the one before.
        let layers = model.config.num_layers;
        if (model.config.every_layer_window()).is_some_and(|w| layers * (w - 1) < p - 1) {
            assert_eq!(
                moved, 0.0,
                "{name}: a token behind every layer's window moved the logits"
            );
        } else {
            assert!(
                moved > far,
                "{name}: one changed token moves the last logits by only {moved}"
            );
        }
    }
}
