//! `kiln serve`'s arguments refused before anything is loaded.

use std::process::Command;

/// `kiln serve --served-model-name NAME MODEL` reads MODEL as a second name (the flag takes
/// every value after it): refused, saying so, rather than serving the default model under
/// both names.
#[test]
fn a_model_after_the_served_names_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny");
    let tc = kiln_model::testing::TinyConfig::default();
    kiln_model::testing::write_tiny_llama(&model, &tc, 1).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["serve", "--served-model-name", "tiny"])
        .arg(&model)
        .output()
        .expect("running kiln");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("`{}` after --served-model-name", model.display()))
            && err.contains("put MODEL before"),
        "{err}"
    );
}
