//! `kiln speed`: decoding measured from the context it is given.

use super::{kiln, model};

/// `kiln speed` decodes from the prompt length it is given, says so in its JSON, and refuses a
/// length the model's context cannot hold before measuring anything.
#[test]
fn speed_decodes_from_the_context_it_is_given() {
    let dir = model("speed", 512);
    let d = dir.to_str().unwrap();
    let json = dir.join("speed.json");
    let base = [
        "speed",
        "--model",
        d,
        "--concurrency",
        "1,3",
        "--prompt-lens",
        "16",
        "--decode-steps",
        "4",
        "--kv-memory",
        "16000000",
    ];
    let run = |extra: &[&str]| kiln(&[&base[..], extra].concat());
    let out = run(&["--decode-context", "100", "--json", json.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let decode = v["decode"].as_array().unwrap();
    let seen: Vec<_> = decode
        .iter()
        .map(|e| (e["sequences"].as_u64(), e["prompt_tokens"].as_u64()))
        .collect();
    assert_eq!(seen, [(Some(1), Some(100)), (Some(3), Some(100))]);
    // 507 + 4 steps + 2 is one past the 512-token context.
    let out = run(&["--decode-context", "507"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("need 513 tokens a sequence; the context holds 512"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("| 1 |"));
    std::fs::remove_dir_all(&dir).ok();
}
