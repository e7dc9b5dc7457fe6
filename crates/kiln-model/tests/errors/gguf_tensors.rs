//! GGUF tensors kiln cannot run as they are, each named with the file: one it would not read,
//! Command-R+'s missing k norm, a missing tensor, a type it does not know, rows that are not
//! whole blocks, data shorter than the type and shape need.

use kiln_model::testing::{self, TinyConfig, model_gguf, tiny_tensors, tiny_tokenizer};
use kiln_model::{DType, Model, ModelError};

use super::f32_gguf;

/// A tensor the forward pass would not read (here a bias on o_proj, which no kiln kernel
/// adds) is refused by name: the model would otherwise run without it.
#[test]
fn tensor_kiln_would_not_read_is_refused_by_name() {
    let mut b = f32_gguf(&TinyConfig::default());
    assert!(Model::from_gguf_bytes(b.to_bytes(), "plain.gguf").is_ok());
    let bias: Vec<u8> = (0..64).flat_map(|_| 0.5f32.to_le_bytes()).collect();
    b.raw_tensor("blk.1.attn_output.bias", &[64], 0, bias);
    let e = Model::from_gguf_bytes(b.to_bytes(), "o-bias.gguf")
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("model.layers.1.self_attn.o_proj.bias") && msg.contains("o-bias.gguf"),
        "{msg}"
    );
}

/// A Command-R GGUF file with `attn_q_norm` reads as Command-R+ (LayerNorms of each head of q
/// and k), whose every layer needs both gains: one with layer 0's q gain alone names the
/// missing k gain and the file; the plain Command-R file loads.
#[test]
fn command_r_plus_without_its_k_norm_names_it() {
    let mut b = f32_gguf(&TinyConfig::cohere());
    let plain = Model::from_gguf_bytes(b.to_bytes(), "command-r.gguf").unwrap();
    assert!(!plain.config.qk_layer_norm);
    let gains: Vec<u8> = (0..4 * 16).flat_map(|_| 1f32.to_le_bytes()).collect();
    b.raw_tensor("blk.0.attn_q_norm.weight", &[16, 4], 0, gains);
    let e = Model::from_gguf_bytes(b.to_bytes(), "command-r-plus.gguf")
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("layers.0.self_attn.k_norm") && msg.contains("command-r-plus.gguf"),
        "{msg}"
    );
}

#[test]
fn unsupported_tensor_type() {
    let mc = TinyConfig::default().model_config();
    let name = "model.layers.0.mlp.down_proj.weight";
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != name)
        .collect();
    let mut b = model_gguf(&mc, &tensors, DType::F32, &tiny_tokenizer::gguf_tokenizer());
    // GGML type 16 is IQ2_XXS: 66 bytes per 256 elements.
    b.raw_tensor(
        "blk.0.ffn_down.weight",
        &[160, 64],
        16,
        vec![0u8; 160 * 64 / 256 * 66],
    );
    let e = Model::from_gguf_bytes(b.to_bytes(), "i-quant.gguf")
        .err()
        .expect("must fail");
    assert!(
        matches!(e, ModelError::UnsupportedTensorType { .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("IQ2_XXS") && msg.contains(name) && msg.contains("i-quant.gguf"),
        "{msg}"
    );
}

#[test]
fn missing_tensor_is_named() {
    let mc = TinyConfig::default().model_config();
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != "model.norm.weight")
        .collect();
    let b = model_gguf(&mc, &tensors, DType::F32, &tiny_tokenizer::gguf_tokenizer());
    let e = Model::from_gguf_bytes(b.to_bytes(), "no-norm.gguf")
        .err()
        .expect("must fail");
    assert!(matches!(e, ModelError::MissingTensor { .. }), "{e:?}");
    assert!(
        e.to_string().contains("model.norm.weight") && e.to_string().contains("no-norm.gguf"),
        "{e}"
    );
}

/// A tiny model whose down projection is replaced by a raw tensor of the given type and bytes.
fn with_raw_down(dims: &[u64], ty: DType, data: Vec<u8>) -> Vec<u8> {
    let mc = TinyConfig::default().model_config();
    let tensors: Vec<_> = tiny_tensors(&mc, 1)
        .into_iter()
        .filter(|t| t.name != "model.layers.0.mlp.down_proj.weight")
        .collect();
    let mut b = model_gguf(&mc, &[], DType::F32, &tiny_tokenizer::gguf_tokenizer());
    // The raw tensor first, so that another tensor's data follows it.
    b.raw_tensor("blk.0.ffn_down.weight", dims, ty.ggml_id(), data);
    for t in &tensors {
        let gname = kiln_model::gguf::names::hf_to_gguf_name(&t.name, mc.architecture);
        let data = match t.name.as_str() {
            n if n.ends_with("q_proj.weight") => {
                testing::permute_rows(&t.data, t.shape[0], mc.num_heads)
            }
            n if n.ends_with("k_proj.weight") => {
                testing::permute_rows(&t.data, t.shape[0], mc.num_kv_heads)
            }
            _ => t.data.clone(),
        };
        b.tensor(&gname, &t.shape, &data, DType::F32);
    }
    b.to_bytes()
}

#[test]
fn rows_not_whole_blocks_are_refused_by_name() {
    // 160 columns of Q4_K: not a whole number of 256-element super-blocks.
    let e = Model::from_gguf_bytes(
        with_raw_down(&[160, 64], DType::Q4_K, vec![0u8; 144 * 40]),
        "rows.gguf",
    )
    .err()
    .expect("must fail");
    assert!(matches!(e, ModelError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("blk.0.ffn_down.weight") && msg.contains("Q4_K") && msg.contains("256"),
        "{msg}"
    );
}

#[test]
fn tensor_shorter_than_its_type_and_shape_is_refused_by_name() {
    // (64, 160) Q8_0 needs 64 * 160 / 32 * 34 bytes; give 100 fewer.
    let need = DType::Q8_0.byte_len(64 * 160);
    let e = Model::from_gguf_bytes(
        with_raw_down(&[160, 64], DType::Q8_0, vec![0u8; need - 100]),
        "short.gguf",
    )
    .err()
    .expect("must fail");
    assert!(matches!(e, ModelError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("blk.0.ffn_down.weight")
            && msg.contains("Q8_0")
            && msg.contains(&need.to_string()),
        "{msg}"
    );
    // The same bytes at full length load.
    assert!(
        Model::from_gguf_bytes(
            with_raw_down(&[160, 64], DType::Q8_0, vec![0u8; need]),
            "ok.gguf"
        )
        .is_ok()
    );
}
