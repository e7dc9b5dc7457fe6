//! vLLM's request log: with `--enable-log-requests` and `--enable-log-outputs` the log names
//! each request's prompt and parameters and each sequence's output, cut to `--max-log-len`;
//! without them it says nothing of either.

use std::io::Write;
use std::sync::Mutex;

use kiln_server::request_log::RequestLog;

use super::*;

/// Everything logged in this test binary.
static LOGGED: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGGED.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&LOGGED.lock().unwrap()).into_owned()
}

#[tokio::test]
async fn requests_and_outputs_are_logged_when_asked() {
    let _ = tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(|| Capture)
            .finish(),
    );
    let logging = start_tiny(|sc, _| {
        sc.request_log = RequestLog {
            requests: true,
            outputs: true,
            max_len: Some(12),
        };
    });
    let body = json!({"model": "tiny", "prompt": "a logged prompt that runs long", "max_tokens": 3,
        "temperature": 0, "seed": 7, "ignore_eos": true});
    let (s, r) = post(&logging, "/v1/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    let output: String = r["choices"][0]["text"]
        .as_str()
        .unwrap()
        .chars()
        .take(12)
        .collect();
    let log = logged();
    let line = |start: &str| {
        (log.lines())
            .find(|l| l.contains(start))
            .unwrap_or_else(|| panic!("no line with {start:?} in {log}"))
            .to_string()
    };
    let request = line("prompt \"a logged pro...\"");
    assert!(request.contains("max_tokens 3, seed 7"), "{request}");
    assert!(request.contains("\"temperature\":0.0"), "{request}");
    let output_line = line(&format!("(length, 3 tokens): {output:?}"));
    assert!(output_line.contains("output of"), "{output_line}");

    // The server without the flags logs neither.
    let quiet = server();
    let body = json!({"model": "tiny", "prompt": "an unlogged prompt", "max_tokens": 2});
    let (s, r) = post(quiet, "/v1/completions", &body).await;
    assert_eq!(s, 200, "{r}");
    assert!(!logged().contains("an unlogged"), "{}", logged());
}
