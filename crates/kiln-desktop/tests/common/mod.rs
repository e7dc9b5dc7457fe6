//! What the desktop app's UI tests share: the tiny random model, the engine's own greedy reply
//! to compare with, and the app in an egui_kittest harness (rendered through wgpu).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use kiln_desktop::store::Store;
use kiln_desktop::{DesktopApp, ModelState};
use kiln_engine::{Engine, EngineConfig, KvSize};
use kiln_frontend::{Frontend, GenerationParams};
use kiln_model::testing::{TinyConfig, write_tiny_gguf};
use kiln_model::{ChatMessage, DType, LoraAdapter, Model};

pub const MAX_TOKENS: i64 = 24;

pub fn tiny_model(dir: &Path) -> PathBuf {
    tiny_model_with(dir, &TinyConfig::default())
}

/// The tiny model as a GGUF file in `dir`, of configuration `tc` (a chat template, say).
pub fn tiny_model_with(dir: &Path, tc: &TinyConfig) -> PathBuf {
    let path = dir.join("tiny.gguf");
    write_tiny_gguf(&path, tc, 7, DType::F32).unwrap();
    path
}

/// The engine's greedy reply to one user message, decoded by the shared front end.
pub fn greedy_reply(model: &Path, user: &str) -> String {
    greedy_to(model, |f| {
        f.chat_tokens(vec![ChatMessage::new("user", user)], None)
            .unwrap()
    })
}

/// The engine's greedy reply (at most `MAX_TOKENS`) to the prompt `prompt` makes with the
/// model's front end, decoded by it.
pub fn greedy_to(model: &Path, prompt: impl FnOnce(&Frontend) -> Vec<u32>) -> String {
    greedy_through(model, None, prompt)
}

/// As [`greedy_to`], through the LoRA adapter at `adapter` where given.
pub fn greedy_through(
    model: &Path,
    adapter: Option<&Path>,
    prompt: impl FnOnce(&Frontend) -> Vec<u32>,
) -> String {
    let (frontend, config, weights) = Frontend::split(Model::load(model).unwrap());
    let ctx = pollster::block_on(kiln_gpu::GpuContext::new()).expect("a GPU adapter (lavapipe)");
    let lora = adapter.map(|a| std::sync::Arc::new(LoraAdapter::load("lora", a, &config).unwrap()));
    let ec = EngineConfig {
        kv: KvSize::Blocks(64),
        lora: lora.into_iter().collect(),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(&ctx, &config, &weights, ec, &mut |_, _| {}).unwrap();
    let params = GenerationParams {
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        ..Default::default()
    };
    let mut spec = frontend.resolve(&params, None).unwrap();
    spec.lora = engine.lora_ref("lora");
    let prompt = prompt(&frontend);
    let request = frontend.request(&spec, 1, prompt, MAX_TOKENS as usize, 0, 0);
    engine.add_request(request).unwrap();
    let mut stream = spec.text_stream();
    let mut text = String::new();
    while engine.has_unfinished() {
        for u in pollster::block_on(engine.step()).unwrap() {
            let piece = stream.update(&frontend.tokenizer, &u).unwrap();
            text += &piece.text;
        }
    }
    text
}

/// The app over a store in `store_dir`, opening `model`. A random model writes characters
/// no bundled font has: those tests allow missing glyphs (drawn as boxes, as the real window
/// does); the others check that every label the app writes itself can be drawn.
pub fn harness(
    store_dir: &Path,
    model: Option<PathBuf>,
    random_text: bool,
) -> Harness<'static, DesktopApp> {
    let store = Store::open(Some(store_dir.to_path_buf())).unwrap();
    let ctx = egui::Context::default();
    let app = DesktopApp::new(store, model, None, &ctx);
    let mut b = Harness::builder().with_size([1100.0, 720.0]).wgpu();
    if random_text {
        b = b.allow_missing_glyphs();
    }
    let h = b.build_ui_state(|ui, app: &mut DesktopApp| app.show(ui), app);
    // The harness has a context of its own; the app's fonts go on it as on the window's.
    kiln_desktop::fonts::install(&h.ctx);
    h
}

/// The app over a store in `dir/store` with the tiny model (written in `dir`) open, the
/// current chat greedy with a token limit; the store's folder, to read back.
pub fn app_with_tiny_model(dir: &Path) -> (Harness<'static, DesktopApp>, PathBuf) {
    let model = tiny_model(dir);
    let store = dir.join("store");
    let mut h = harness(&store, Some(model), true);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    (h, store)
}

/// Steps the UI until `done` holds (a real-time bound: the engine runs on its own thread).
pub fn step_until(h: &mut Harness<'_, DesktopApp>, what: &str, done: impl Fn(&DesktopApp) -> bool) {
    let start = Instant::now();
    while !done(h.state()) {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "timed out waiting for {what}"
        );
        h.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    h.run_ok();
}

pub fn ready(app: &DesktopApp) -> bool {
    if let ModelState::Failed { error, .. } = &app.model {
        panic!("the model failed to open: {error}");
    }
    matches!(app.model, ModelState::Ready(_))
}

/// Greedy decoding with a token limit, for the current chat.
pub fn greedy(h: &mut Harness<'_, DesktopApp>) {
    let app = h.state_mut();
    let s = &mut app.chats[app.current].sampling;
    s.temperature = Some(0.0);
    s.max_tokens = Some(MAX_TOKENS);
}

/// Types `text` into the field labelled `label` and presses Enter (a number setting, say).
pub fn enter(h: &mut Harness<'_, DesktopApp>, label: &str, text: &str) {
    h.get_by_label(label).focus();
    h.step();
    h.get_by_label(label).type_text(text);
    h.step();
    h.key_press(egui::Key::Enter);
    h.run_ok();
}

pub fn send(h: &mut Harness<'_, DesktopApp>, text: &str) {
    h.get_by_label("Message").focus();
    h.step();
    h.get_by_label("Message").type_text(text);
    h.step();
    h.get_by_label("Send").click();
    h.step();
}

pub fn last_reply(app: &DesktopApp, chat: usize) -> &kiln_desktop::store::Message {
    let m = app.chats[chat].messages.last().unwrap();
    assert_eq!(m.role, "assistant");
    m
}
