//! Drawing the window: chats on the left, the model and settings on the right, the
//! conversation in the middle. Every control has a label (the UI tests find them by it, and
//! screen readers read them).

mod adapters;
mod chat_settings;
mod conversation;
mod side_panel;
mod sidebar;

use eframe::egui;

use crate::app::DesktopApp;
use crate::attach::is_model;

/// One frame.
pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    app.poll();
    // A model file or folder dropped on the window opens it; other files are attached to
    // the message being written.
    let dropped: Vec<_> = ui.ctx().input(|i| {
        (i.raw.dropped_files.iter())
            .map(|f| f.path().to_path_buf())
            .filter(|p| !p.as_os_str().is_empty())
            .collect()
    });
    let (models, files): (Vec<_>, Vec<_>) = dropped.into_iter().partition(|p| is_model(p));
    for path in &files {
        app.attach(path);
    }
    if let Some(path) = models.into_iter().next() {
        app.open_model(path);
    }
    egui::Panel::left("chats")
        .default_size(220.0)
        .show(ui, |ui| sidebar::show(app, ui));
    egui::Panel::right("model")
        .default_size(320.0)
        .max_size(480.0)
        .show(ui, |ui| side_panel::show(app, ui));
    egui::CentralPanel::default_margins().show(ui, |ui| conversation::show(app, ui));
}
