//! The browser demo routes: `/demo` redirects to the page, which is served with the model file.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn demo_page_and_model_are_served() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<html>kiln demo</html>").unwrap();
    let model = dir.path().join("weights.gguf");
    std::fs::write(&model, b"GGUF-bytes").unwrap();
    let demo = kiln_server::DemoFiles {
        page_dir: dir.path().to_path_buf(),
        model_file: Some(model),
    };
    let base = start_tiny(move |sc, _| sc.demo = Some(demo));
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = plain.get(format!("{base}/demo")).send().await.unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "/demo/");
    assert_eq!(get_text(&base, "/demo/").await, "<html>kiln demo</html>");
    assert_eq!(
        get_text(&base, "/demo/models/weights.gguf").await,
        "GGUF-bytes"
    );
    let missing = plain
        .get(format!("{base}/demo/models/other.gguf"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // The API is still there.
    assert!(get_text(&base, "/v1/models").await.contains("tiny"));
}
