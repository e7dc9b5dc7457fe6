//! LoRA adapters in llama.cpp's GGUF adapter files read to the same pairs as the same adapters
//! in PEFT's folders (names, Q/K row order, scales, types), and GGUF files that are not LoRA
//! adapters for the model refused by name.

use std::path::{Path, PathBuf};

use kiln_model::testing::{GgufBuilder, LLAMA_PROJECTIONS, MetaValue, TinyConfig, TinyLora};
use kiln_model::{DType, LoraAdapter, ModelConfig};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-lora-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn lora(modules: &[&str], rslora: bool, seed: u64) -> TinyLora {
    TinyLora {
        modules: modules.iter().map(|s| s.to_string()).collect(),
        rank: 3,
        alpha: 6.0,
        rslora,
        seed,
    }
}

/// Both files of `t` for `mc`, read back: (PEFT, GGUF).
fn both(dir: &Path, t: &TinyLora, mc: &ModelConfig, gguf: DType) -> [LoraAdapter; 2] {
    let (peft, file) = (dir.join("peft"), dir.join("a.gguf"));
    t.write(&peft, mc, DType::F32).unwrap();
    t.write_gguf(&file, mc, gguf).unwrap();
    [peft, file].map(|p| LoraAdapter::load("a", &p, mc).unwrap())
}

/// Every pair of `got` within `tol` of `want`'s (relative to 1), with the same names and ranks.
fn assert_same(what: &str, got: &LoraAdapter, want: &LoraAdapter, tol: f32) {
    let (got, want) = (got.pairs().unwrap(), want.pairs().unwrap());
    let mut names: Vec<_> = want.keys().collect();
    names.sort();
    let mut got_names: Vec<_> = got.keys().collect();
    got_names.sort();
    assert_eq!(got_names, names, "{what}");
    for n in names {
        let (g, w) = (&got[n], &want[n]);
        assert_eq!(g.rank, w.rank, "{what}: {n}");
        for (m, (gv, wv)) in [("A", (&g.a, &w.a)), ("B", (&g.b, &w.b))] {
            let worst = (gv.iter().zip(wv.iter()))
                .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
                .fold(0f32, f32::max);
            assert!(worst <= tol, "{what}: {n} {m} off by {worst}");
        }
    }
}

#[test]
fn gguf_adapters_read_as_their_peft_twins() {
    let archs = [
        (TinyConfig::default(), LLAMA_PROJECTIONS.to_vec()),
        (TinyConfig::qwen2(), LLAMA_PROJECTIONS.to_vec()),
        (TinyConfig::gemma3(), LLAMA_PROJECTIONS.to_vec()),
        (
            TinyConfig::phi3(),
            vec!["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
        ),
    ];
    for (cfg, modules) in archs {
        let mc = cfg.model_config();
        let what = format!("{:?}", mc.architecture);
        let dir = tmp(&what);
        // f32: the same values, and the same fingerprint (prefix-cache keys) in either format.
        let [peft, gguf] = both(&dir, &lora(&modules, false, 5), &mc, DType::F32);
        assert_same(&what, &gguf, &peft, 0.0);
        assert_eq!(gguf.fingerprint, peft.fingerprint, "{what}");
        // The same files given as bytes (as the browser has them).
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        let from_bytes = [
            LoraAdapter::from_gguf_bytes("a", "a.gguf", read("a.gguf"), &mc).unwrap(),
            LoraAdapter::from_peft_bytes(
                "a",
                "peft",
                &String::from_utf8(read("peft/adapter_config.json")).unwrap(),
                read("peft/adapter_model.safetensors"),
                &mc,
            )
            .unwrap(),
        ];
        for a in &from_bytes {
            assert_same(&what, a, &peft, 0.0);
            assert_eq!(a.fingerprint, peft.fingerprint, "{what}");
        }
        // An rsLoRA adapter: its scale carried in B, the file having no alpha.
        let some = [modules[0], modules[modules.len() - 1]];
        let [peft, gguf] = both(&dir, &lora(&some, true, 6), &mc, DType::F32);
        assert_same(&format!("{what} rsLoRA"), &gguf, &peft, 1e-6);
        // f16 and Q8_0 files: within their rounding (values up to 0.3, B's scaled by 2).
        let [peft, gguf] = both(&dir, &lora(&modules, false, 7), &mc, DType::F16);
        assert_same(&format!("{what} f16"), &gguf, &peft, 2.0 * 0.3 / 2048.0);
        let [peft, gguf] = both(&dir, &lora(&modules, false, 8), &mc, DType::Q8_0);
        assert_same(
            &format!("{what} q8_0"),
            &gguf,
            &peft,
            2.0 * 0.3 / 254.0 * 1.01,
        );
        assert!(
            gguf.fingerprint != peft.fingerprint,
            "{what}: Q8_0 changed no value"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// An adapter file with `meta` and tensors `names` (f32 pairs of rank 2 for the tiny Llama's
/// q_proj, or a 64-vector for other names).
fn adapter_file(dir: &Path, meta: &[(&str, &str)], names: &[&str]) -> PathBuf {
    let mut g = GgufBuilder::new();
    for (k, v) in meta {
        g.meta(k, MetaValue::String(v.to_string()));
    }
    for n in names {
        let shape: &[usize] = match n.rsplit('.').next() {
            Some("lora_a") => &[2, 64],
            Some("lora_b") => &[64, 2],
            _ => &[64],
        };
        let len = shape.iter().product();
        g.tensor(n, shape, &vec![0.01; len], DType::F32);
    }
    let p = dir.join("adapter.gguf");
    g.write(&p).unwrap();
    p
}

/// An adapter file's metadata and tensors, and what its refusal must say.
type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>, &'a [&'a str]);

#[test]
fn gguf_files_that_are_not_lora_adapters_for_the_model_are_refused() {
    let mc = TinyConfig::default().model_config();
    let dir = tmp("refused");
    let lora = [("general.type", "adapter"), ("adapter.type", "lora")];
    let llama = [&lora[..], &[("general.architecture", "llama")]].concat();
    let pair = ["blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b"];
    let cases: [Case; 6] = [
        // A model, not an adapter.
        (
            vec![("general.architecture", "llama")],
            pair.to_vec(),
            &["general.type", "not a LoRA adapter"],
        ),
        (
            [&llama[..2], &[("general.architecture", "qwen2")]].concat(),
            pair.to_vec(),
            &["qwen2", "llama"],
        ),
        (
            vec![
                ("general.type", "adapter"),
                ("adapter.type", "control_vector"),
                ("general.architecture", "llama"),
            ],
            pair.to_vec(),
            &["control_vector"],
        ),
        // A norm trained whole, which llama.cpp skips: refused, not ignored.
        (
            llama.clone(),
            [&pair[..], &["blk.0.attn_norm.weight"]].concat(),
            &["blk.0.attn_norm.weight", "not a LoRA pair"],
        ),
        (
            llama.clone(),
            vec!["blk.0.attn_q.weight.lora_b"],
            &["blk.0.attn_q.weight.lora_b", "no A"],
        ),
        // The embedding, which kiln does not adapt.
        (
            llama.clone(),
            vec!["token_embd.weight.lora_a", "token_embd.weight.lora_b"],
            &["token_embd.weight.lora_a", "embed_tokens", "decoder layers"],
        ),
    ];
    for (meta, names, want) in cases {
        let p = adapter_file(&dir, &meta, &names);
        let err = LoraAdapter::load("a", &p, &mc).unwrap_err().to_string();
        assert!(err.contains("adapter.gguf"), "{err}");
        for w in want {
            assert!(err.contains(w), "{meta:?} {names:?}: {err}");
        }
    }
    // The same pair, readable, is accepted (so each case above failed for its own reason).
    let p = adapter_file(&dir, &llama, &pair);
    let a = LoraAdapter::load("a", &p, &mc).unwrap();
    assert_eq!(a.ranks["model.layers.0.self_attn.q_proj.weight"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An adapter for a GPT-NeoX, Falcon, GPT-2 or StarCoder model is refused, saying that LoRA
/// on them is not built (their adapters name their own projections, q/k/v's rows stored by
/// head or by group, GPT-2's transposed), where the same adapter loads for a Llama.
#[test]
fn adapters_on_gpt_neox_and_falcon_are_refused() {
    let dir = tmp("gpt-neox");
    let t = lora(&["mlp.up_proj"], false, 4);
    let llama = TinyConfig::default().model_config();
    t.write(&dir, &llama, DType::F32).unwrap();
    LoraAdapter::load("a", &dir, &llama).expect("for a Llama");
    for tc in [
        TinyConfig::gpt_neox(),
        TinyConfig::falcon(),
        TinyConfig::gpt2(),
        TinyConfig::starcoder(),
        TinyConfig::bloom(),
        TinyConfig::mpt(),
        TinyConfig::gptj(),
        TinyConfig::internlm2(),
        TinyConfig::exaone(),
    ] {
        let name = tc.architecture.gguf_name();
        let err = (LoraAdapter::load("a", &dir, &tc.model_config()).unwrap_err()).to_string();
        assert!(err.contains(name) && err.contains("not built"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
