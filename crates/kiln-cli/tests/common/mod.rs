//! What the CLI's tests share: `kiln generate` run greedily.

use std::path::Path;
use std::process::Command;

/// Runs `kiln generate` greedily; returns stdout and stderr (panics if it failed).
pub fn generate(model: &Path, prompt: &str, extra: &[&str]) -> (String, String) {
    let m = model.to_str().unwrap();
    let args = ["generate", "--model", m, "--prompt", prompt];
    let greedy = ["--temperature", "0", "--max-tokens", "12", "--ignore-eos"];
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args.iter().chain(&greedy).chain(extra))
        .output()
        .expect("running kiln");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}
