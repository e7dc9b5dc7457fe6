//! `kiln generate --lora FOLDER`: the reply of the model with the adapter merged into its
//! weights, not the base model's; and with `--kv-disk-dir` the adapter's blocks are kept
//! apart from the base model's (a run through the adapter finds none of them).

mod common;

use std::process::Command;

use kiln_model::DType;
use kiln_model::testing::{LLAMA_PROJECTIONS, TinyConfig, TinyLora, write_tiny_llama};

fn generate(model: &std::path::Path, extra: &[&str]) -> (String, String) {
    let prompt = "the cat sat on the mat and the dog ran to the park ".repeat(3);
    common::generate(model, &prompt, extra)
}

#[test]
fn generate_runs_through_the_adapter() {
    let tmp = tempfile::tempdir().unwrap();
    let [base, merged, lora] = ["base", "merged", "lora"].map(|d| tmp.path().join(d));
    let tc = TinyConfig::default();
    let mc = write_tiny_llama(&base, &tc, 5).unwrap();
    let adapter = TinyLora {
        modules: LLAMA_PROJECTIONS.map(String::from).to_vec(),
        rank: 4,
        alpha: 8.0,
        rslora: false,
        seed: 9,
    };
    adapter.write(&lora, &mc, DType::F16).unwrap();
    adapter.write_merged(&merged, &tc, 5, DType::F16).unwrap();
    let disk = tmp.path().join("kv");
    let d = ["--kv-disk-dir", disk.to_str().unwrap()];

    let (plain, _) = generate(&base, &d);
    let (want, _) = generate(&merged, &[]);
    let with = [&d[..], &["--lora", lora.to_str().unwrap()]].concat();
    let (got, err) = generate(&base, &with);
    assert_eq!(got, want, "the merged model's reply");
    assert_ne!(got, plain, "not the base model's");
    assert!(
        !err.contains(" cached"),
        "the base model's blocks on disk are not the adapter's: {err}"
    );
    let (again, err) = generate(&base, &with);
    assert_eq!(again, want);
    assert!(
        err.contains("blocks from disk"),
        "the adapter's own blocks are: {err}"
    );

    let missing = tmp.path().join("nowhere");
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "generate",
            "--model",
            base.to_str().unwrap(),
            "--prompt",
            "hi",
        ])
        .args(["--lora", missing.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("adapter_config.json"),
        "{err}"
    );
}
