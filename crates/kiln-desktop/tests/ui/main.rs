//! The desktop app driven through its UI (egui_kittest, rendered through wgpu on whatever
//! adapter the machine has: lavapipe here), with the tiny random model: the streamed reply
//! equals the engine's own greedy output, the stop button ends a reply mid-stream, two chats
//! generate at once, chats survive a restart, a bad model file shows its error, a dropped
//! model file opens, and Chinese and Japanese text is drawn with the system's fonts. The
//! accessibility check is on: every control must have a label. `fonts.rs` draws text and
//! icons egui's bundled fonts lack; `speculation.rs` turns on guesses from the settings;
//! `attach.rs` sends text files with a message; `context.rs` keeps a chat longer than the
//! context going; `continuing.rs` continues a cut reply;
//! `reply_format.rs` holds replies to a JSON schema; `versions.rs` keeps regenerated replies;
//! `kv_disk.rs` serves a chat's prompt from disk after the app is opened again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use kiln_desktop::store::Store;
use kiln_desktop::{DesktopApp, ModelState};

mod attach;
#[path = "../common/mod.rs"]
mod common;
mod context;
mod continuing;
mod fonts;
mod kv_disk;
mod kv_type;
mod lora;
mod reply_format;
mod sleep;
mod speculation;
mod versions;

use common::*;

#[test]
fn replies_stream_equal_to_the_engine_and_two_chats_run_together() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let expected = [
        greedy_reply(&model, "hello there"),
        greedy_reply(&model, "and again"),
    ];
    assert!(!expected[0].is_empty() && expected[0] != expected[1]);

    let mut h = harness(&dir.path().join("store"), Some(model.clone()), true);
    step_until(&mut h, "the model to open", ready);
    h.get_by_label_contains("tiny");
    // The engine's device memory, of the device's (lavapipe reports its heap).
    h.get_by_label_contains(" MiB free at load)");
    greedy(&mut h);
    send(&mut h, "hello there");
    assert_eq!(h.state().chats[0].messages[0].text, "hello there");
    assert_eq!(h.state().chats[0].title, "hello there");
    // A second chat starts while the first may still be generating.
    h.get_by_label("+ New chat").click();
    h.step();
    assert_eq!(h.state().current, 1);
    greedy(&mut h);
    send(&mut h, "and again");
    let mut together = h.state().generating.len() == 2;
    let start = Instant::now();
    while !h.state().generating.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "replies did not finish"
        );
        together |= h.state().generating.len() == 2;
        h.step();
    }
    h.run_ok();
    for (chat, expected) in expected.iter().enumerate() {
        let reply = last_reply(h.state(), chat);
        assert_eq!(&reply.text, expected, "chat {chat}");
        let stats = reply.stats.as_ref().unwrap();
        assert_eq!(stats.end, "length");
        assert_eq!(stats.generated, MAX_TOKENS as usize);
    }
    assert!(together, "the two replies never ran at the same time");
    // The speed line is shown under the reply.
    h.get_all_by_label_contains("tokens/s").next().unwrap();

    // The frame renders through wgpu (lavapipe here) to an image with a reply in it.
    let image = h.render().expect("the window renders through wgpu");
    assert_eq!((image.width(), image.height()), (1100, 720));
    let first = image.get_pixel(0, 0);
    assert!(image.pixels().filter(|p| *p != first).count() > 10_000);
    image
        .save(Path::new(env!("CARGO_TARGET_TMPDIR")).join("desktop-ui.png"))
        .unwrap();

    // Switch back to the first chat by its title; restart over the same store.
    h.get_all_by_label("hello there").next().unwrap().click();
    h.run_ok();
    assert_eq!(h.state().current, 0);
    let chats = h.state().chats.clone();
    drop(h);
    let h = harness(&dir.path().join("store"), None, true);
    assert_eq!(h.state().chats, chats);
    assert_eq!(
        h.state().settings.last_model.as_deref(),
        Some(model.as_path())
    );
}

#[test]
fn the_stop_button_ends_a_reply_mid_stream() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    {
        let app = h.state_mut();
        let s = &mut app.chats[0].sampling;
        s.temperature = Some(0.0);
        s.max_tokens = Some(400);
    }
    send(&mut h, "tell me a long story");
    step_until(&mut h, "the first text", |a| {
        a.chats[0]
            .messages
            .last()
            .is_some_and(|m| !m.text.is_empty())
    });
    h.get_by_label("Stop").click();
    h.run_ok();
    assert!(h.state().generating.is_empty());
    let reply = last_reply(h.state(), 0);
    let stats = reply.stats.clone().unwrap();
    assert_eq!(stats.end, "stopped");
    assert!(stats.generated < 400, "{stats:?}");
    // The KV blocks of the stopped reply are freed once the engine takes the abort.
    let ModelState::Ready(m) = &h.state().model else {
        unreachable!()
    };
    let engine = m.engine.clone();
    let start = Instant::now();
    while engine.stats().num_running > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the reply kept running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Regenerate replaces the reply.
    h.get_by_label("Regenerate").click();
    h.step();
    assert!(h.state().is_generating(), "{:?}", h.state().notices);
    assert!(last_reply(h.state(), 0).stats.is_none());
    h.step();
    if h.state().is_generating() {
        h.get_by_label("Stop").click();
    }
    h.run_ok();
    // Edit takes the message back into the box, dropping it and the reply; sending again
    // asks anew.
    h.get_by_label("Edit").click();
    h.run_ok();
    assert!(h.state().chats[0].messages.is_empty());
    assert_eq!(h.state().input, "tell me a long story");
    h.get_by_label("Send").click();
    h.step();
    assert!(h.state().is_generating());
    assert_eq!(h.state().chats[0].messages[0].text, "tell me a long story");
}

/// A stop string typed into the chat's settings is kept with the chat and cuts the reply
/// where the engine's greedy text first contains it.
#[test]
fn a_stop_string_from_the_panel_cuts_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let full = greedy_reply(&model, "hello there");
    let chars: Vec<char> = full.chars().collect();
    assert!(chars.len() > 12, "{full:?}");
    let stop: String = chars[8..10].iter().collect();
    let want = &full[..full.find(&stop).unwrap()];

    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    greedy(&mut h);
    h.get_by_label("Stop strings (one per line)").focus();
    h.step();
    h.get_by_label("Stop strings (one per line)")
        .type_text(&stop);
    h.step();
    assert_eq!(
        h.state().chats[0].sampling.stop,
        Some(kiln_frontend::StopSpec::Many(vec![stop.clone()]))
    );
    send(&mut h, "hello there");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    let reply = last_reply(h.state(), 0);
    assert_eq!(reply.text, want, "stop {stop:?} in {full:?}");
    assert_eq!(reply.stats.as_ref().unwrap().end, "stop");
}

#[test]
fn a_bad_model_file_shows_its_error_and_a_dropped_one_opens() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.gguf");
    std::fs::write(&bad, b"not a model").unwrap();
    let mut h = harness(&dir.path().join("store"), None, false);
    h.get_by_label("Model path").focus();
    h.step();
    h.get_by_label("Model path")
        .type_text(&bad.display().to_string());
    h.step();
    h.get_by_label("Open").click();
    step_until(&mut h, "the error", |a| {
        matches!(a.model, ModelState::Failed { .. })
    });
    // The window names the file and why it cannot be read.
    let ModelState::Failed { error, .. } = &h.state().model else {
        unreachable!()
    };
    assert!(error.contains("broken.gguf"), "{error}");
    h.get_by_label_contains(&format!("Cannot open {}", bad.display()));
    // Nothing was recorded as a model that opens.
    assert!(h.state().settings.recent_models.is_empty());

    // A model file dropped on the window opens.
    let model = tiny_model(dir.path());
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped(model.clone())));
    h.step();
    step_until(&mut h, "the dropped model to open", ready);
    assert_eq!(h.state().settings.recent_models, vec![model]);
}

/// A file dropped on the window, as the windowing integration hands it to egui.
#[derive(Debug)]
struct Dropped(PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

/// `request` written as it is; the whole response.
fn raw_http(port: u16, request: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    response
}

/// A POST over plain HTTP/1.1; the response body as JSON.
fn post_json(port: u16, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let body = body.to_string();
    let response = raw_http(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{response}");
    serde_json::from_str(body).unwrap()
}

#[test]
fn the_api_switch_serves_the_apps_engine() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let expected = greedy_reply(&model, "hello there");
    let mut h = harness(&dir.path().join("store"), Some(model), true);
    step_until(&mut h, "the model to open", ready);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    h.state_mut().settings.api_port = port;
    h.get_by_label("Let web pages call it (CORS)").click();
    h.run_ok();
    assert!(h.state().settings.api_cors);
    h.get_by_label("Serve the OpenAI API").click();
    h.run_ok();
    assert!(h.state().api.is_some(), "{:?}", h.state().notices);
    // A web page's preflight is answered for any origin.
    let head = raw_http(
        port,
        "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: http://page.test\r\n\
         Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
    );
    assert!(
        head.to_lowercase()
            .contains("access-control-allow-origin: *"),
        "{head}"
    );
    h.get_by_label_contains(&format!("127.0.0.1:{port}/v1"));
    let r = post_json(
        port,
        "/v1/chat/completions",
        &serde_json::json!({"model": "tiny", "messages": [{"role": "user", "content": "hello there"}],
            "temperature": 0, "max_tokens": MAX_TOKENS}),
    );
    assert_eq!(
        r["choices"][0]["message"]["content"],
        expected.as_str(),
        "{r}"
    );
    // A chat exported as an API request body is one the server takes (its sampling fields
    // included) and answers as the app would.
    greedy(&mut h);
    send(&mut h, "hello there");
    step_until(&mut h, "the reply", |app| {
        app.generating.is_empty() && app.chats[0].messages.len() == 2
    });
    assert_eq!(last_reply(h.state(), 0).text, expected);
    send(&mut h, "and again");
    step_until(&mut h, "the second reply", |app| {
        app.generating.is_empty() && app.chats[0].messages.len() == 4
    });
    let second = last_reply(h.state(), 0).text.clone();
    let path = dir.path().join("chat.json");
    h.state_mut().chats[0].messages.pop();
    h.state_mut().export(path.clone());
    let body: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 3, "{body}");
    assert_eq!(body["messages"][2]["content"], "and again");
    assert_eq!(body["max_tokens"], MAX_TOKENS);
    let r = post_json(port, "/v1/chat/completions", &body);
    assert_eq!(
        r["choices"][0]["message"]["content"],
        second.as_str(),
        "{r}"
    );
    // Off again: the port is closed.
    h.get_by_label("Serve the OpenAI API").click();
    h.run_ok();
    assert!(h.state().api.is_none());
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the API still listens"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_engine_can_share_the_windows_device() {
    use eframe::egui_wgpu::{WgpuSetup, WgpuSetupExisting};
    use eframe::wgpu;
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let expected = greedy_reply(&model, "hello there");
    // One device, opened as the window opens it with `share_device`: kiln's needs merged
    // into egui's. The UI renders on it and the engine runs on it.
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter =
        pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
            .expect("a GPU adapter (lavapipe)");
    let (device, queue) = pollster::block_on(
        adapter.request_device(&kiln_desktop::device::shared_descriptor(&adapter)),
    )
    .unwrap();
    let gpu = kiln_desktop::device::shared_context(&adapter, &device, &queue);
    let store = Store::open(Some(dir.path().join("store"))).unwrap();
    let app = DesktopApp::new(store, Some(model), Some(gpu), &egui::Context::default());
    let setup = WgpuSetup::Existing(WgpuSetupExisting {
        instance,
        adapter,
        device,
        queue,
    });
    let mut h = Harness::builder()
        .with_size([1100.0, 720.0])
        .wgpu_setup(setup)
        .allow_missing_glyphs()
        .build_ui_state(|ui, app: &mut DesktopApp| app.show(ui), app);
    step_until(&mut h, "the model to open", ready);
    h.get_by_label_contains("(the window's device)");
    greedy(&mut h);
    send(&mut h, "hello there");
    step_until(&mut h, "the reply", |a| a.generating.is_empty());
    assert_eq!(last_reply(h.state(), 0).text, expected);
    h.render().expect("the window renders on the shared device");
}
