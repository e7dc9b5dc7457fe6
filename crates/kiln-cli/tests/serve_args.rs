//! `kiln serve`'s arguments refused before anything is loaded.

use std::process::Command;

/// A tiny model folder in `dir`.
fn tiny(dir: &std::path::Path) -> std::path::PathBuf {
    let model = dir.join("tiny");
    let tc = kiln_model::testing::TinyConfig::default();
    kiln_model::testing::write_tiny_llama(&model, &tc, 1).unwrap();
    model
}

/// `kiln serve` with `args`, which must fail: its stderr.
fn refused(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .arg("serve")
        .args(args)
        .output()
        .expect("running kiln");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    err
}

/// `kiln serve --served-model-name NAME MODEL` reads MODEL as a second name (the flag takes
/// every value after it): refused, saying so, rather than serving the default model under
/// both names.
#[test]
fn a_model_after_the_served_names_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny(tmp.path());
    let err = refused(&[
        "--served-model-name".as_ref(),
        "tiny".as_ref(),
        model.as_ref(),
    ]);
    assert!(
        err.contains(&format!("`{}` after --served-model-name", model.display()))
            && err.contains("put MODEL before"),
        "{err}"
    );
}

/// vLLM's `--enable-lora` and the JSON form of `--lora-modules`: an adapter made for another
/// base model is refused, naming both, before anything is read.
#[test]
fn an_adapter_for_another_base_model_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny(tmp.path());
    let module = r#"{"name": "sql", "path": "/nowhere", "base_model_name": "other"}"#;
    let err = refused(&[
        model.as_ref(),
        "--enable-lora".as_ref(),
        "--lora-modules".as_ref(),
        module.as_ref(),
    ]);
    assert!(
        err.contains("`sql`'s base_model_name `other` is not the served model"),
        "{err}"
    );
}
