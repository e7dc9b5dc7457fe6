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

/// vLLM's `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` turns on the routes that load adapters while
/// serving, as `--allow-runtime-lora-updating` does: the route answers (400 for a path that
/// holds no adapter), where a server started without either has none (404).
#[test]
fn vllms_environment_variable_allows_runtime_lora_updating() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny(tmp.path());
    let http = |port: u16, request: &str| -> Option<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.write_all(request.as_bytes()).ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        Some(reply)
    };
    for (env, want) in [(Some("True"), "HTTP/1.1 400"), (None, "HTTP/1.1 404")] {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
        cmd.arg("serve")
            .arg(&model)
            .args(["--port", &port.to_string()]);
        match env {
            Some(v) => cmd.env("VLLM_ALLOW_RUNTIME_LORA_UPDATING", v),
            None => cmd.env_remove("VLLM_ALLOW_RUNTIME_LORA_UPDATING"),
        };
        let mut server = cmd
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting kiln serve");
        let health = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        let up = (0..600).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            http(port, health).is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        });
        let body = r#"{"lora_name": "x", "lora_path": "/nowhere"}"#;
        let load = format!(
            "POST /v1/load_lora_adapter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let reply = http(port, &load);
        let _ = server.kill();
        let _ = server.wait();
        assert!(up, "kiln serve did not come up (env {env:?})");
        let reply = reply.unwrap_or_default();
        assert!(reply.starts_with(want), "env {env:?}: {reply}");
    }
}
