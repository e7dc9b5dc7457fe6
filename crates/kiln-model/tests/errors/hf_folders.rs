//! Hugging Face folders under their families' own tensor names: StableLM 2 12B's gains a head,
//! GPT-NeoX's `query_key_value`, GPT-2's, GPT-J's and BLOOM's checkpoints as their published
//! folders hold them (without the `transformer.` prefix, with stored masks), each wrong tensor
//! named as the folder names it.

use kiln_model::testing::{self, TinyConfig};
use kiln_model::{DType, Model};

use super::tmp;

/// The tensors of an f32 safetensors file.
fn f32_tensors(path: &std::path::Path) -> Vec<testing::NamedTensor> {
    let bytes = std::fs::read(path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    (file.tensors().into_iter())
        .map(|(name, t)| testing::NamedTensor {
            name,
            shape: t.shape().to_vec(),
            data: (t.data().chunks(4))
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        })
        .collect()
}

/// A StableLM 2 12B folder keeps each head's q/k LayerNorm gain as a tensor of its own; one
/// missing from a layer's set is named with the folder's file, not read as a shorter gain.
#[test]
fn stablelm2_12b_without_one_head_gain_names_it() {
    let dir = tmp("stablelm2-12b");
    testing::write_tiny_llama(&dir, &TinyConfig::stablelm2_12b(), 1).unwrap();
    Model::load(&dir).expect("the whole folder loads");
    let path = dir.join("model.safetensors");
    let all = f32_tensors(&path);
    let gone = "model.layers.1.self_attn.k_layernorm.norms.1.weight";
    let kept: Vec<_> = (all.iter().filter(|t| t.name != gone).cloned()).collect();
    assert_eq!(kept.len() + 1, all.len());
    std::fs::write(&path, testing::safetensors_bytes(&kept, DType::F32)).unwrap();
    let e = Model::load(&dir).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.to_string().contains(gone), "{e}");
}

/// A GPT-NeoX folder is read under its own tensor names, which messages keep: one whose
/// `query_key_value` is not q, k and v of its heads, or that lacks a tensor, is refused naming
/// the tensor as the folder does.
#[test]
fn gpt_neox_folders_name_tensors_their_own_way() {
    let dir = tmp("gpt-neox");
    testing::write_tiny_llama(&dir, &TinyConfig::gpt_neox(), 1).unwrap();
    Model::load(&dir).expect("the whole folder loads");
    let path = dir.join("model.safetensors");
    let tensors = f32_tensors(&path);
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir).err().expect("must fail").to_string()
    };
    let qkv = "gpt_neox.layers.1.attention.query_key_value.weight";
    let short: Vec<_> = (tensors.iter().cloned())
        .map(|mut t| {
            if t.name == qkv {
                // Sixteen rows short: not q, k and v of four heads of 32.
                t.shape[0] -= 16;
                t.data.truncate(t.shape[0] * t.shape[1]);
            }
            t
        })
        .collect();
    let e = write(&short);
    assert!(e.contains(qkv) && e.contains("[368, 128]"), "{e}");
    let dense = "gpt_neox.layers.2.attention.dense.bias";
    let without: Vec<_> = (tensors.iter().filter(|t| t.name != dense).cloned()).collect();
    assert_eq!(without.len() + 1, tensors.len());
    let e = write(&without);
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains(dense), "{e}");
}

/// A GPT-2 checkpoint as `openai-community/gpt2` holds it: without the `transformer.` prefix,
/// with each layer's causal mask stored beside the weights (`h.N.attn.bias`, which changes
/// nothing), its products transposed (`Conv1D`, `[in, out]`). It reads as the folder kiln
/// writes does; a product stored the wrong way round is refused naming it as the folder does.
#[test]
fn gpt2_checkpoints_without_prefix_and_with_masks_load() {
    let dir = tmp("gpt2");
    testing::write_tiny_llama(&dir, &TinyConfig::gpt2(), 1).unwrap();
    let written = Model::load(&dir).expect("the whole folder loads");
    let names = [
        "model.layers.1.self_attn.qkv_proj.weight",
        "model.embed_positions.weight",
    ];
    let want = names.map(|n| written.weights.read_f32(n).unwrap());
    drop(written);
    let path = dir.join("model.safetensors");
    let tensors = f32_tensors(&path);
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir)
    };
    let mut bare: Vec<_> = (tensors.iter().cloned())
        .map(|mut t| {
            t.name = t.name.trim_start_matches("transformer.").to_string();
            t
        })
        .collect();
    for i in 0..3 {
        bare.push(testing::NamedTensor {
            name: format!("h.{i}.attn.bias"),
            shape: vec![1, 1, 4, 4],
            data: vec![1.0; 16],
        });
    }
    let model = write(&bare).expect("the bare checkpoint loads");
    for (name, want) in names.iter().zip(&want) {
        assert!(model.weights.read_f32(name).unwrap() == *want, "{name}");
    }
    assert_eq!(
        model
            .weights
            .shape("model.layers.2.mlp.down_proj.weight")
            .unwrap(),
        [128, 160]
    );
    drop(model);
    // `c_fc` stored as kiln runs it, `[out, in]`, not as `Conv1D` keeps it.
    let fc = "h.0.mlp.c_fc.weight";
    let turned: Vec<_> = (bare.iter().cloned())
        .map(|mut t| {
            if t.name == fc {
                t.shape.reverse();
            }
            t
        })
        .collect();
    let e = write(&turned).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains(fc), "{e}");
}

/// A GPT-J checkpoint as `EleutherAI/gpt-j-6b` holds it: each layer's causal mask and its
/// fill value stored beside the weights (`attn.bias`, `attn.masked_bias`), which change
/// nothing, so it loads; a tensor of another name there is refused by name.
#[test]
fn gptj_checkpoints_with_masks_load() {
    let dir = tmp("gptj");
    testing::write_tiny_llama(&dir, &TinyConfig::gptj(), 1).unwrap();
    let path = dir.join("model.safetensors");
    let mut tensors = f32_tensors(&path);
    let extra = |name: String| testing::NamedTensor {
        name,
        shape: vec![1],
        data: vec![-1e9],
    };
    for i in 0..3 {
        tensors.push(extra(format!("transformer.h.{i}.attn.bias")));
        tensors.push(extra(format!("transformer.h.{i}.attn.masked_bias")));
    }
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir)
    };
    drop(write(&tensors).expect("the checkpoint with its masks loads"));
    tensors.push(extra("transformer.h.0.attn.q_proj.bias".into()));
    let e = write(&tensors).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains("transformer.h.0.attn.q_proj.bias"), "{e}");
}

/// A BLOOM checkpoint as `bigscience/bloom-560m` holds it, without the `transformer.` prefix,
/// reads as the folder kiln writes (with the prefix) does; its messages name the tensors
/// without it too.
#[test]
fn bloom_checkpoints_without_prefix_load() {
    let dir = tmp("bloom");
    testing::write_tiny_llama(&dir, &TinyConfig::bloom(), 1).unwrap();
    let written = Model::load(&dir).expect("the whole folder loads");
    let qkv = "model.layers.2.self_attn.qkv_proj.weight";
    let want = written.weights.read_f32(qkv).unwrap();
    drop(written);
    let path = dir.join("model.safetensors");
    let bare: Vec<_> = (f32_tensors(&path).into_iter())
        .map(|mut t| {
            t.name = t.name.trim_start_matches("transformer.").to_string();
            t
        })
        .collect();
    let write = |tensors: &[testing::NamedTensor]| {
        std::fs::write(&path, testing::safetensors_bytes(tensors, DType::F32)).unwrap();
        Model::load(&dir)
    };
    let model = write(&bare).expect("the bare checkpoint loads");
    assert!(model.weights.read_f32(qkv).unwrap() == want);
    drop(model);
    let norm = "word_embeddings_layernorm.bias";
    let without: Vec<_> = (bare.iter().filter(|t| t.name != norm).cloned()).collect();
    let e = write(&without).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains(&format!("\"{norm}\"")), "{e}");
}

/// A folder whose weights are a PyTorch pickle (`pytorch_model.bin`, older checkpoints') is
/// refused saying so, not only that `model.safetensors` is missing.
#[test]
fn pickled_weights_are_named() {
    let dir = tmp("pickle");
    testing::write_tiny_llama(&dir, &TinyConfig::default(), 1).unwrap();
    std::fs::rename(dir.join("model.safetensors"), dir.join("pytorch_model.bin")).unwrap();
    let e = Model::load(&dir).err().expect("must fail").to_string();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        e.contains("pytorch_model.bin") && e.contains("safetensors"),
        "{e}"
    );
}
