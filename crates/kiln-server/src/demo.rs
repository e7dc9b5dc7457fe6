//! The browser demo under `/demo/`: the page (web-demo/, built by scripts/build-web.sh) and the
//! served model file at `/demo/models/{file name}`, so the page can fetch it without a second
//! server. The inference then runs in the browser, on WebGPU.

use std::path::PathBuf;

use axum::Router;
use axum::extract::{Path, Request};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use tower::ServiceExt;
use tower_http::services::{ServeDir, ServeFile};

use crate::ApiError;

#[derive(Clone, Debug)]
pub struct DemoFiles {
    /// The page's folder (web-demo/).
    pub page_dir: PathBuf,
    /// A model file the page may load (a GGUF file).
    pub model_file: Option<PathBuf>,
}

pub(crate) fn mount<S: Clone + Send + Sync + 'static>(
    app: Router<S>,
    demo: &DemoFiles,
) -> Router<S> {
    let model = demo.model_file.clone();
    let models = Router::new().route(
        "/models/{name}",
        get(move |Path(name): Path<String>, req: Request| {
            let model = model.clone();
            async move { serve_model(model, &name, req).await }
        }),
    );
    let page = ServeDir::new(&demo.page_dir)
        .append_index_html_on_directories(true)
        .fallback(models);
    // `/demo` itself redirects to `/demo/`, so the page's relative links resolve inside it.
    app.nest_service("/demo", page)
        .layer(axum::middleware::from_fn(
            |req: Request, next: axum::middleware::Next| async move {
                if req.uri().path() == "/demo" {
                    Redirect::permanent("/demo/").into_response()
                } else {
                    next.run(req).await
                }
            },
        ))
}

async fn serve_model(model: Option<PathBuf>, name: &str, req: Request) -> Response {
    match model {
        Some(path) if path.file_name().is_some_and(|f| f == name) => {
            match ServeFile::new(path).oneshot(req).await {
                Ok(res) => res.into_response(),
                Err(e) => ApiError::not_found(format!("model file: {e}")).into_response(),
            }
        }
        _ => ApiError::not_found(format!("no model file {name} is served")).into_response(),
    }
}
