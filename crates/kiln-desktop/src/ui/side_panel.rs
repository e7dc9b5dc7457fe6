//! The right-hand panel: the model (open, recent, load progress, what it is), the engine (adapter,
//! KV cache in use, the local API switch), its LoRA adapters (`adapters.rs`), the current
//! chat's settings, and the app's.

use eframe::egui;
use kiln_engine::KvDtype;

use crate::app::{DesktopApp, ModelState};

pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    egui::ScrollArea::vertical().show(ui, |ui| {
        ui.heading("Model");
        open_controls(app, ui);
        model_state(app, ui);
        super::adapters::show(app, ui);
        ui.separator();
        ui.heading("Chat settings");
        super::chat_settings::show(app, ui);
        ui.separator();
        ui.heading("App");
        app_settings(app, ui);
    });
}

fn open_controls(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let mut open = None;
    let label = ui.label("Model path");
    ui.horizontal(|ui| {
        let r = ui
            .add(
                egui::TextEdit::singleline(&mut app.path_input)
                    .hint_text("GGUF file or model folder")
                    .desired_width(170.0),
            )
            .labelled_by(label.id);
        let entered = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if (ui.button("Open").clicked() || entered) && !app.path_input.trim().is_empty() {
            open = Some(app.path_input.trim().into());
        }
    });
    ui.horizontal(|ui| {
        if ui.button("Browse file…").clicked() {
            open = rfd::FileDialog::new()
                .add_filter("GGUF", &["gguf"])
                .pick_file();
        }
        if ui.button("Browse folder…").clicked() {
            open = rfd::FileDialog::new().pick_folder();
        }
    });
    if !app.settings.recent_models.is_empty() {
        egui::CollapsingHeader::new("Recent models").show(ui, |ui| {
            for p in &app.settings.recent_models {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default();
                if ui
                    .link(name)
                    .on_hover_text(p.display().to_string())
                    .clicked()
                {
                    open = Some(p.clone());
                }
            }
        });
    }
    if let Some(p) = open {
        app.open_model(p);
    }
}

fn model_state(app: &mut DesktopApp, ui: &mut egui::Ui) {
    match &app.model {
        ModelState::None => {
            ui.weak("No model open.");
        }
        ModelState::Loading {
            path,
            stage,
            fraction,
            ..
        } => {
            ui.label(format!("Opening {}", path.display()));
            ui.add(
                egui::ProgressBar::new(*fraction)
                    .show_percentage()
                    .text(format!("{stage} {:.0}%", fraction * 100.0)),
            );
        }
        ModelState::Failed { path, error } => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Cannot open {}: {error}", path.display()),
            );
        }
        ModelState::Ready(m) => {
            let i = &m.info;
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            egui::Grid::new("model_info").num_columns(2).show(ui, |ui| {
                let mut row = |k: &str, v: String| {
                    ui.label(k);
                    ui.add(egui::Label::new(v).wrap());
                    ui.end_row();
                };
                row("Name", i.name.clone());
                row("Architecture", i.architecture.clone());
                row("Parameters", format!("{:.1} M", i.parameters as f64 / 1e6));
                row("Size", format!("{:.1} MiB", mib(i.file_bytes)));
                row("Tensors", i.quantization.clone());
                row("Context", format!("{} tokens", i.context));
                let shared = if app.shared_gpu.is_some() {
                    " (the window's device)"
                } else {
                    ""
                };
                row("Adapter", format!("{}{shared}", m.engine.info.adapter));
                let s = m.engine.stats();
                let total = m.engine.info.num_gpu_blocks.max(1);
                row(
                    "KV cache",
                    format!(
                        "{} of {} blocks in use ({:.0}%), {} cached",
                        s.kv_blocks_used,
                        total,
                        100.0 * s.kv_blocks_used as f64 / total as f64,
                        s.kv_blocks_cached
                    ),
                );
                if let Some(d) = m.engine.disk_stats() {
                    row(
                        "On disk",
                        format!(
                            "{} blocks ({:.0} MiB), {} read back",
                            d.blocks_resident,
                            mib(d.bytes_resident),
                            d.blocks_restored
                        ),
                    );
                }
                row("Running", format!("{} replies", s.num_running));
                if s.spec_draft_tokens > 0 {
                    row(
                        "Guesses",
                        format!(
                            "{} of {} confirmed",
                            s.spec_accepted_tokens, s.spec_draft_tokens
                        ),
                    );
                }
                let (used, device) = m.engine.info.gpu_bytes;
                let of = match device {
                    Some(d) => match d.free {
                        Some(free) => format!(
                            " of {:.0} MiB ({:.0} MiB free at load)",
                            mib(d.total),
                            mib(free)
                        ),
                        None => format!(" of {:.0} MiB", mib(d.total)),
                    },
                    None => String::new(),
                };
                let memory = match m.engine.is_sleeping() {
                    true => "given back: the engine sleeps until the next message".to_string(),
                    false => format!("{:.0} MiB{of}", mib(used)),
                };
                row("GPU memory", memory);
            });
            // The engine may fall asleep between frames: look again now and then.
            if app.settings.sleep_after_idle_s > 0 {
                ui.ctx()
                    .request_repaint_after(std::time::Duration::from_secs(1));
            }
            ui.horizontal_wrapped(|ui| {
                let empty = egui::Button::new("Empty the KV cache");
                if ui
                    .add_enabled(!app.emptying(), empty)
                    .on_hover_text(
                        "Lets go of every cached block no reply holds, in memory and on disk",
                    )
                    .clicked()
                {
                    app.empty_kv_cache();
                }
                if let Some(r) = &app.emptied {
                    ui.weak(format!(
                        "emptied: {} blocks, {} files",
                        r.gpu_blocks + r.cpu_blocks,
                        r.disk_blocks
                    ));
                }
            });
            api_switch(app, ui);
        }
    }
}

fn api_switch(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let mut on = app.api.is_some();
    ui.horizontal(|ui| {
        if ui.checkbox(&mut on, "Serve the OpenAI API").changed() {
            if on {
                let (port, cors) = (app.settings.api_port, app.settings.api_cors);
                let started = app.loaded().map(|m| crate::api::Api::start(m, port, cors));
                match started {
                    Some(Ok(api)) => app.api = Some(api),
                    Some(Err(e)) => app.notices.push(format!("API: {e:#}")),
                    None => {}
                }
            } else if let Some(api) = app.api.take() {
                api.stop();
            }
        }
        let label = ui.label("on port");
        let r = ui
            .add_enabled(
                app.api.is_none(),
                egui::DragValue::new(&mut app.settings.api_port).range(1..=65535),
            )
            .labelled_by(label.id);
        if r.changed() {
            app.save_settings();
        }
    });
    let cors = egui::Checkbox::new(&mut app.settings.api_cors, "Let web pages call it (CORS)");
    let r = ui
        .add_enabled(app.api.is_none(), cors)
        .on_hover_text("Browser pages of any site may then use the API: keep it off unless a web app of yours needs it.");
    if r.changed() {
        app.save_settings();
    }
    if let Some(api) = &app.api {
        ui.label(format!("http://{}/v1", api.addr));
    }
}

fn app_settings(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let mut changed = false;
    ui.horizontal(|ui| {
        changed |= ui
            .radio_value(&mut app.settings.dark, true, "Dark")
            .changed();
        changed |= ui
            .radio_value(&mut app.settings.dark, false, "Light")
            .changed();
    });
    ui.horizontal(|ui| {
        let label = ui.label("Font size");
        let r = ui
            .add(egui::Slider::new(&mut app.settings.font_size, 10.0..=24.0))
            .labelled_by(label.id);
        changed |= r.changed();
    });
    ui.horizontal(|ui| {
        let label = ui.label("KV cache (MiB)");
        let r = ui
            .add(egui::DragValue::new(&mut app.settings.kv_memory_mib).range(16..=65536))
            .labelled_by(label.id);
        changed |= r.changed();
    })
    .response
    .on_hover_text("Used when a model is opened next.");
    ui.horizontal(|ui| {
        let label = ui.label("KV cache type");
        egui::ComboBox::from_id_salt("kv cache type")
            .selected_text(app.settings.kv_dtype.name())
            .show_ui(ui, |ui| {
                for d in [KvDtype::F16, KvDtype::Q8, KvDtype::Fp8, KvDtype::F32] {
                    changed |= ui
                        .selectable_value(&mut app.settings.kv_dtype, d, d.name())
                        .changed();
                }
            })
            .response
            .labelled_by(label.id);
    })
    .response
    .on_hover_text(
        "f16: as computed, to 3 decimal digits. q8_0: 1.9x the tokens in the same memory, \
         bytes with a scale per 32 values (heads whose K rows are a multiple of 64 values). \
         fp8: 2x the tokens, coarser. f32: half the tokens of f16. Used when a model is \
         opened next.",
    );
    ui.horizontal(|ui| {
        let label = ui.label("KV cache on disk (MiB, 0: off)");
        let r = ui
            .add(egui::DragValue::new(&mut app.settings.kv_disk_mib).range(0..=1 << 20))
            .labelled_by(label.id);
        changed |= r.changed();
    })
    .response
    .on_hover_text(
        "Chats' computed prompts kept on disk, so a long chat goes on at once after the \
         model is opened again instead of reading it all again. Used when a model is opened \
         next.",
    );
    ui.horizontal(|ui| {
        let label = ui.label("Give GPU memory back after idle (s, 0: never)");
        let r = ui
            .add(egui::DragValue::new(&mut app.settings.sleep_after_idle_s).range(0..=1 << 20))
            .labelled_by(label.id);
        if r.changed() {
            changed = true;
            app.apply_sleep_setting();
        }
    })
    .response
    .on_hover_text(
        "After this many seconds without a reply running, the engine lets go of the model's \
         weights and KV cache on the GPU (chats and the disk cache stay); the next message \
         loads them again, which takes a few seconds. Applies at once.",
    );
    ui.horizontal(|ui| {
        let label = ui.label("LoRA adapter slots (0: off)");
        let r = ui
            .add(
                egui::DragValue::new(&mut app.settings.lora_slots)
                    .range(0..=kiln_engine::MAX_LORA_SLOTS),
            )
            .labelled_by(label.id);
        changed |= r.changed();
        let label = ui.label("of rank up to");
        let r = ui
            .add(egui::DragValue::new(&mut app.settings.lora_rank).range(1..=256))
            .labelled_by(label.id);
        changed |= r.changed();
    })
    .response
    .on_hover_text(
        "Room for LoRA adapters loaded from the model panel, each chat picking one in its \
         settings: chats through as many adapters as there are slots generate at once (more \
         adapters may be loaded; the others' chats wait for a slot). Each slot takes GPU \
         memory for every projection, and with any slot the fused rotary and activation \
         steps run apart. Used when a model is opened next.",
    );
    ui.horizontal(|ui| {
        let label = ui.label("Speculative tokens (0: off)");
        let r = ui
            .add(
                egui::DragValue::new(&mut app.settings.speculative_tokens)
                    .range(0..=kiln_engine::MAX_DRAFTS as usize),
            )
            .labelled_by(label.id);
        changed |= r.changed();
    })
    .response
    .on_hover_text(
        "Guesses of each reply's next tokens, taken from the chat so far and kept where the \
         model confirms them: the same replies, faster where they quote. Used when a model is \
         opened next.",
    );
    changed |= ui
        .checkbox(
            &mut app.settings.share_device,
            "Run the engine on the window's GPU device (from the next start)",
        )
        .changed();
    if changed {
        app.apply_style(ui.ctx());
        app.save_settings();
    }
}
