//! The model panel's LoRA adapters, where the engine has room for them: the ones loaded,
//! each with an Unload button, and a path field (or a file or folder picked) to load another.

use eframe::egui;

use crate::app::DesktopApp;

pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let Some(m) = app.loaded() else {
        return;
    };
    if !m.engine.info.lora_loadable {
        return;
    }
    let loaded: Vec<(String, usize)> = (m.engine.lora.loaded().into_iter())
        .map(|(_, a)| (a.name.clone(), a.rank))
        .collect();
    ui.strong("LoRA adapters");
    let busy = app.lora_busy();
    let mut unload = None;
    for (name, rank) in &loaded {
        ui.horizontal(|ui| {
            ui.label(format!("{name} (rank {rank})"));
            let b = egui::Button::new("Unload");
            if ui.add_enabled(!busy, b).clicked() {
                unload = Some(name.clone());
            }
        });
    }
    if loaded.is_empty() {
        ui.weak("none loaded");
    }
    let mut load = None;
    let label = ui.label("LoRA adapter path");
    ui.horizontal(|ui| {
        ui.add(
            egui::TextEdit::singleline(&mut app.lora_input)
                .hint_text("PEFT folder or GGUF adapter")
                .desired_width(150.0),
        )
        .labelled_by(label.id);
        let path = app.lora_input.trim();
        if ui
            .add_enabled(!busy && !path.is_empty(), egui::Button::new("Load"))
            .clicked()
        {
            load = Some(path.into());
        }
    });
    ui.horizontal(|ui| {
        if ui
            .add_enabled(!busy, egui::Button::new("Adapter file…"))
            .clicked()
        {
            load = rfd::FileDialog::new()
                .add_filter("GGUF", &["gguf"])
                .pick_file();
        }
        if ui
            .add_enabled(!busy, egui::Button::new("Adapter folder…"))
            .clicked()
        {
            load = rfd::FileDialog::new().pick_folder();
        }
    });
    if let Some(name) = unload {
        app.unload_lora(name);
    }
    if let Some(path) = load {
        app.load_lora(path);
    }
}
