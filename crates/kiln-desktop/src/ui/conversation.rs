//! The conversation: messages (replies as Markdown, with their speed line, and their reasoning
//! folded under "Thinking"), copy, edit, regenerate and continue, and the message box with Send /
//! Stop and the files attached to it.

use eframe::egui;

use crate::app::{DesktopApp, ModelState};

pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    notices(app, ui);
    egui::Panel::bottom("composer").show(ui, |ui| composer(app, ui));
    let generating = app.is_generating();
    let mut action = None;
    egui::ScrollArea::vertical()
        .auto_shrink([false, false])
        .stick_to_bottom(true)
        .show(ui, |ui| {
            let chat = &app.chats[app.current];
            if chat.messages.is_empty() {
                ui.weak(match app.model {
                    ModelState::Ready(_) => "Write a message below.",
                    _ => "Open a model on the right (or drop a GGUF file or a model folder here).",
                });
            }
            let last = chat.messages.len().saturating_sub(1);
            for (i, m) in chat.messages.iter().enumerate() {
                ui.add_space(8.0);
                ui.strong(if m.role == "user" { "You" } else { "Assistant" });
                if !m.reasoning.is_empty() {
                    // Still reasoning: the reply has no answer yet.
                    let thinking = generating && i == last && m.text.is_empty();
                    egui::CollapsingHeader::new(if thinking { "Thinking..." } else { "Thinking" })
                        .id_salt(("reasoning", &chat.id, i))
                        .show(ui, |ui| ui.weak(&m.reasoning));
                }
                if m.role == "assistant" {
                    egui_commonmark::CommonMarkViewer::new().show(ui, &mut app.markdown, &m.text);
                } else {
                    ui.label(&m.text);
                }
                if let Some(s) = &m.stats {
                    ui.small(s.line());
                }
                ui.horizontal(|ui| {
                    let busy = generating && i == last;
                    if !busy && ui.small_button("Copy").clicked() {
                        ui.ctx().copy_text(m.text.clone());
                    }
                    if !generating && m.role == "user" && ui.small_button("Edit").clicked() {
                        action = Some(Action::Edit(i));
                    }
                    if !generating
                        && i == last
                        && m.role == "assistant"
                        && ui.small_button("Regenerate").clicked()
                    {
                        action = Some(Action::Regenerate);
                    }
                    let versions = m.version_count();
                    if i == last && versions > 1 {
                        let at = m.version;
                        let back = ui.add_enabled(
                            !generating && at > 0,
                            egui::Button::new("Previous").small(),
                        );
                        ui.small(format!("version {} of {versions}", at + 1));
                        let on = ui.add_enabled(
                            !generating && at + 1 < versions,
                            egui::Button::new("Next").small(),
                        );
                        if back.clicked() {
                            action = Some(Action::Version(at - 1));
                        }
                        if on.clicked() {
                            action = Some(Action::Version(at + 1));
                        }
                    }
                    let cut = m.stats.as_ref().is_some_and(|s| s.end != "stop");
                    if !generating
                        && i == last
                        && m.role == "assistant"
                        && cut
                        && ui.small_button("Continue").clicked()
                    {
                        action = Some(Action::Continue);
                    }
                });
            }
        });
    match action {
        Some(Action::Edit(i)) => app.edit(i),
        Some(Action::Regenerate) => app.regenerate(),
        Some(Action::Continue) => app.continue_reply(),
        Some(Action::Version(v)) => app.show_version(v),
        None => {}
    }
}

enum Action {
    Edit(usize),
    Regenerate,
    Continue,
    Version(usize),
}

fn notices(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let mut dismiss = None;
    for (i, n) in app.notices.iter().enumerate() {
        // Wrapped: a long notice (a path) must not widen the panel past the window, which
        // would push the Send button out of it.
        ui.horizontal_wrapped(|ui| {
            ui.colored_label(ui.visuals().error_fg_color, n);
            if ui.small_button("Dismiss").clicked() {
                dismiss = Some(i);
            }
        });
    }
    if let Some(i) = dismiss {
        app.notices.remove(i);
    }
}

fn composer(app: &mut DesktopApp, ui: &mut egui::Ui) {
    ui.add_space(6.0);
    let ready = app.loaded().is_some();
    let generating = app.is_generating();
    attachments(app, ui);
    let label = ui.label("Message");
    let mut clicked = false;
    let mut enter = false;
    ui.horizontal(|ui| {
        let edit = ui
            .add_sized(
                [ui.available_width() - 70.0, 56.0],
                egui::TextEdit::multiline(&mut app.input)
                    .hint_text("Enter sends, Shift+Enter starts a new line"),
            )
            .labelled_by(label.id);
        enter =
            edit.has_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter) && !i.modifiers.shift);
        ui.vertical(|ui| {
            clicked = if generating {
                ui.button("Stop").clicked()
            } else {
                ui.add_enabled(ready, egui::Button::new("Send")).clicked()
            };
            let attach = ui
                .small_button("Attach")
                .on_hover_text("Attach text files (or drop them on the window)");
            if attach.clicked()
                && let Some(paths) = rfd::FileDialog::new().pick_files()
            {
                for p in paths {
                    app.attach(&p);
                }
            }
        });
    });
    if enter && app.input.ends_with('\n') {
        // The key also typed a newline.
        app.input.pop();
    }
    if clicked && generating {
        app.stop();
    } else if (clicked || enter) && !generating {
        app.send();
    }
    ui.add_space(6.0);
}

/// The files waiting to go with the next message, each with a button that removes it.
fn attachments(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let mut remove = None;
    ui.horizontal_wrapped(|ui| {
        for (i, a) in app.attachments.iter().enumerate() {
            ui.label(format!(
                "{} ({:.1} KiB)",
                a.name,
                a.text.len() as f64 / 1024.0
            ));
            if ui.small_button(format!("Remove {}", a.name)).clicked() {
                remove = Some(i);
            }
        }
    });
    if let Some(i) = remove {
        app.attachments.remove(i);
    }
}
