//! Text and icons egui's bundled fonts lack, drawn with no glyph missing (the harness fails
//! on any): Chinese and Japanese from the system's fonts, a code block's copy icon and
//! check mark from the app's own icon font.

use super::*;

/// A chat in Chinese and Japanese, with an emoji, drawn with no glyph missing: the
/// window's system font provider (eframe's `system_fonts`, installed here on the harness's
/// context as eframe installs it on the window's) finds the machine's fonts for what egui's
/// bundled fonts lack. The harness fails on any missing glyph. Needs a CJK font installed
/// (`scripts/setup.sh` installs Debian's `fonts-droid-fallback`).
#[test]
fn cjk_text_is_drawn_with_the_systems_fonts() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(&dir.path().join("store"), None, false);
    h.ctx.add_font_provider(std::sync::Arc::new(
        egui_system_font_provider::SystemFontProvider::new(),
    ));
    let mut chat = kiln_desktop::store::Chat::new();
    chat.title = "你好".into();
    show_chat(
        &mut h,
        chat,
        &[
            ("user", "你好，请用中文回答。"),
            ("assistant", "好的！日本語も話せます。😀"),
        ],
    );
    h.get_by_label_contains("日本語も話せます");
    let image = h.render().expect("the window renders through wgpu");
    image
        .save(Path::new(env!("CARGO_TARGET_TMPDIR")).join("desktop-cjk.png"))
        .unwrap();
}

/// A reply with a code block draws its copy icon (U+1F5D0, from the app's own icon font:
/// egui's fonts lack it) with no glyph missing, and the icon copies the code.
#[test]
fn a_code_blocks_copy_icon_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(&dir.path().join("store"), None, false);
    let chat = kiln_desktop::store::Chat::new();
    show_chat(
        &mut h,
        chat,
        &[
            ("user", "Print hello in Rust."),
            (
                "assistant",
                "Here:\n\n```rust\nfn main() {\n    println!(\"hello\");\n}\n```\n",
            ),
        ],
    );
    let image = h.render().expect("the window renders through wgpu");
    image
        .save(Path::new(env!("CARGO_TARGET_TMPDIR")).join("desktop-code-block.png"))
        .unwrap();
    h.get_by_label("\u{1F5D0}").click();
    let mut copied = false;
    for _ in 0..4 {
        h.step();
        copied |= h.output().platform_output.commands.iter().any(
            |c| matches!(c, egui::OutputCommand::CopyText(t) if t.contains("println!(\"hello\")")),
        );
    }
    assert!(copied, "the icon copies the code");
    h.run_ok(); // the check mark it shows then, drawn too
}

/// Opens `chat` with `messages` added and draws it.
fn show_chat(
    h: &mut Harness<'static, DesktopApp>,
    mut chat: kiln_desktop::store::Chat,
    messages: &[(&str, &str)],
) {
    for &(role, text) in messages {
        chat.messages.push(kiln_desktop::store::Message {
            role: role.into(),
            text: text.into(),
            ..Default::default()
        });
    }
    let app = h.state_mut();
    app.chats.push(chat);
    app.current = app.chats.len() - 1;
    h.run_ok();
}
