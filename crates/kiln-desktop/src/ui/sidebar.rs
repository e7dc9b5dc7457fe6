//! The chat list: new, select, rename, delete, export (Markdown, or an API request body).

use eframe::egui;

use crate::app::DesktopApp;

pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    ui.add_space(6.0);
    if ui.button("+ New chat").clicked() {
        app.new_chat();
    }
    ui.separator();
    let mut action = None;
    egui::ScrollArea::vertical().show(ui, |ui| {
        for i in (0..app.chats.len()).rev() {
            if let Some((at, title)) = &mut app.renaming
                && *at == i
            {
                let label = ui.label("Chat title");
                let edit = ui
                    .add(egui::TextEdit::singleline(title).desired_width(f32::INFINITY))
                    .labelled_by(label.id);
                if edit.lost_focus() || ui.input(|i| i.key_pressed(egui::Key::Enter)) {
                    action = Some(Action::Rename(i, title.clone()));
                } else {
                    edit.request_focus();
                }
                continue;
            }
            let chat = &app.chats[i];
            let busy = if app.generating.contains_key(&chat.id) {
                " (replying)"
            } else {
                ""
            };
            let r = ui.selectable_label(i == app.current, format!("{}{busy}", chat.title));
            if r.clicked() {
                action = Some(Action::Select(i));
            }
            r.context_menu(|ui| {
                if ui.button("Rename").clicked() {
                    action = Some(Action::StartRename(i));
                }
                if ui.button("Export as Markdown…").clicked() {
                    action = Some(Action::Export(i, "md"));
                }
                if ui.button("Export as an API request (JSON)…").clicked() {
                    action = Some(Action::Export(i, "json"));
                }
                if ui.button("Delete").clicked() {
                    action = Some(Action::Delete(i));
                }
            });
        }
    });
    match action {
        Some(Action::Select(i)) => app.current = i,
        Some(Action::StartRename(i)) => app.renaming = Some((i, app.chats[i].title.clone())),
        Some(Action::Rename(i, title)) => {
            app.renaming = None;
            if !title.trim().is_empty() {
                app.chats[i].title = title.trim().to_string();
                app.current = i;
                app.save_current();
            }
        }
        Some(Action::Delete(i)) => app.delete_chat(i),
        Some(Action::Export(i, ext)) => {
            app.current = i;
            let name = format!("{}.{ext}", app.chats[i].title.replace(['/', '\\'], "-"));
            if let Some(path) = rfd::FileDialog::new().set_file_name(name).save_file() {
                app.export(path);
            }
        }
        None => {}
    }
}

enum Action {
    Select(usize),
    StartRename(usize),
    Rename(usize, String),
    Delete(usize),
    /// The chat, in the format of this file extension.
    Export(usize, &'static str),
}
