//! The right-hand panel: the model (open, recent, load progress, what it is), the engine (adapter,
//! KV cache in use, the local API switch), the current chat's settings, and the app's.

use eframe::egui;

use crate::app::{DesktopApp, ModelState};
use crate::reply_format::{FormatKind, ReplyFormat};
use kiln_frontend::{GenerationParams, StopSpec};

pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    egui::ScrollArea::vertical().show(ui, |ui| {
        ui.heading("Model");
        open_controls(app, ui);
        model_state(app, ui);
        ui.separator();
        ui.heading("Chat settings");
        chat_settings(app, ui);
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
                row("GPU memory", format!("{:.0} MiB{of}", mib(used)));
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
                let started = app
                    .loaded()
                    .map(|m| crate::api::Api::start(m, app.settings.api_port));
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
    if let Some(api) = &app.api {
        ui.label(format!("http://{}/v1", api.addr));
    }
}

fn chat_settings(app: &mut DesktopApp, ui: &mut egui::Ui) {
    let chat = &mut app.chats[app.current];
    let mut changed = false;
    let label = ui.label("System prompt");
    let r = ui
        .add(
            egui::TextEdit::multiline(&mut chat.system)
                .hint_text("(none)")
                .desired_rows(2),
        )
        .labelled_by(label.id);
    changed |= r.lost_focus();
    let s: &mut GenerationParams = &mut chat.sampling;
    changed |= knob(ui, "Temperature", &mut s.temperature, 0.7, 0.0..=2.0, 0.01);
    changed |= knob(ui, "Top-p", &mut s.top_p, 0.9, 0.0..=1.0, 0.01);
    changed |= knob(ui, "Top-k", &mut s.top_k, 40, 0..=1000, 1.0);
    changed |= knob(ui, "Min-p", &mut s.min_p, 0.05, 0.0..=1.0, 0.01);
    changed |= knob(
        ui,
        "Repetition penalty",
        &mut s.repetition_penalty,
        1.1,
        1.0..=2.0,
        0.01,
    );
    changed |= knob(
        ui,
        "Presence penalty",
        &mut s.presence_penalty,
        0.5,
        -2.0..=2.0,
        0.01,
    );
    changed |= knob(
        ui,
        "Frequency penalty",
        &mut s.frequency_penalty,
        0.5,
        -2.0..=2.0,
        0.01,
    );
    changed |= knob(ui, "Max tokens", &mut s.max_tokens, 512, 1..=131072, 4.0);
    changed |= knob(ui, "Seed", &mut s.seed, 0, 0..=i64::MAX, 1.0);
    changed |= stop_strings(ui, &chat.id, &mut s.stop);
    changed |= reply_format(ui, &chat.id, &mut chat.format);
    if changed {
        app.save_current();
    }
}

/// The reply format: a choice of text, JSON object or JSON schema, and for a schema its text
/// (a JSON error shown under it). Returns whether it changed or its editing ended (to save).
fn reply_format(ui: &mut egui::Ui, chat_id: &str, format: &mut ReplyFormat) -> bool {
    let mut changed = false;
    ui.horizontal(|ui| {
        let label = ui.label("Reply format");
        egui::ComboBox::from_id_salt(("reply format", chat_id))
            .selected_text(format.kind.label())
            .show_ui(ui, |ui| {
                for kind in FormatKind::ALL {
                    changed |= ui
                        .selectable_value(&mut format.kind, kind, kind.label())
                        .changed();
                }
            })
            .response
            .labelled_by(label.id);
    });
    if format.kind == FormatKind::JsonSchema {
        let label = ui.label("JSON schema");
        let r = ui
            .add(
                egui::TextEdit::multiline(&mut format.schema)
                    .code_editor()
                    .hint_text(r#"{"type": "object", ...}"#)
                    .desired_rows(3),
            )
            .labelled_by(label.id);
        changed |= r.lost_focus();
        if let Err(e) = format.response_format() {
            ui.colored_label(ui.visuals().error_fg_color, e);
        }
    }
    changed
}

/// Stop strings, one per line (none: unset), edited in a buffer kept per chat so that a new,
/// still empty line survives the frame. Returns whether editing ended (to save).
fn stop_strings(ui: &mut egui::Ui, chat_id: &str, stop: &mut Option<StopSpec>) -> bool {
    let id = ui.scope_id().with(("stop strings", chat_id));
    let mut text = ui
        .data_mut(|d| d.get_temp::<String>(id))
        .unwrap_or_else(|| {
            let lines = stop.clone().map(StopSpec::into_vec).unwrap_or_default();
            lines.join("\n")
        });
    let label = ui.label("Stop strings (one per line)");
    let r = ui
        .add(
            egui::TextEdit::multiline(&mut text)
                .hint_text("(none)")
                .desired_rows(1),
        )
        .labelled_by(label.id);
    if r.changed() {
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        *stop = (!lines.is_empty()).then_some(StopSpec::Many(lines));
    }
    ui.data_mut(|d| d.insert_temp(id, text));
    r.lost_focus()
}

/// A knob that is either the model's default (unchecked) or a value.
fn knob<T: egui::emath::Numeric>(
    ui: &mut egui::Ui,
    label: &str,
    value: &mut Option<T>,
    first: T,
    range: std::ops::RangeInclusive<T>,
    speed: f64,
) -> bool {
    let mut changed = false;
    ui.horizontal(|ui| {
        let mut set = value.is_some();
        let check = ui.checkbox(&mut set, label);
        if check.changed() {
            *value = set.then_some(first);
            changed = true;
        }
        match value {
            Some(v) => {
                let r = ui
                    .add(egui::DragValue::new(v).range(range).speed(speed))
                    .labelled_by(check.id);
                changed |= r.changed();
            }
            None => {
                ui.weak("model default");
            }
        }
    });
    changed
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
