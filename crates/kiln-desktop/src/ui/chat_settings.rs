//! The current chat's settings in the right-hand panel: system prompt, generation knobs
//! (each unset until changed, the model's own setting shown), a thinking budget (for a model
//! that reasons), the reply's format and stop strings, and the LoRA adapter its replies run
//! through (where the model has room for them).

use eframe::egui;

use crate::app::DesktopApp;
use crate::reply_format::{FormatKind, ReplyFormat};
use kiln_frontend::{GenerationParams, ReasoningFormat, StopSpec};

/// What an unset generation knob is called.
const MODEL: &str = "model default";

pub fn show(app: &mut DesktopApp, ui: &mut egui::Ui) {
    // The adapters a chat may pick, where the open model has room for them.
    let adapters: Option<Vec<String>> =
        (app.loaded())
            .filter(|m| m.engine.info.lora_loadable)
            .map(|m| {
                (m.engine.lora.loaded().into_iter())
                    .map(|(_, a)| a.name.clone())
                    .collect()
            });
    // Whether the open model reasons (a thinking budget bounds nothing otherwise).
    let reasons = (app.loaded()).is_none_or(|m| {
        ReasoningFormat::detect(m.frontend.chat_template.as_ref()) != ReasoningFormat::None
    });
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
    changed |= knob(
        ui,
        MODEL,
        "Temperature",
        &mut s.temperature,
        0.7,
        0.0..=2.0,
        0.01,
    );
    changed |= knob(ui, MODEL, "Top-p", &mut s.top_p, 0.9, 0.0..=1.0, 0.01);
    changed |= knob(ui, MODEL, "Top-k", &mut s.top_k, 40, 0..=1000, 1.0);
    changed |= knob(ui, MODEL, "Min-p", &mut s.min_p, 0.05, 0.0..=1.0, 0.01);
    changed |= knob(
        ui,
        MODEL,
        "Repetition penalty",
        &mut s.repetition_penalty,
        1.1,
        1.0..=2.0,
        0.01,
    );
    changed |= knob(
        ui,
        MODEL,
        "Presence penalty",
        &mut s.presence_penalty,
        0.5,
        -2.0..=2.0,
        0.01,
    );
    changed |= knob(
        ui,
        MODEL,
        "Frequency penalty",
        &mut s.frequency_penalty,
        0.5,
        -2.0..=2.0,
        0.01,
    );
    changed |= knob(
        ui,
        MODEL,
        "Max tokens",
        &mut s.max_tokens,
        512,
        1..=131072,
        4.0,
    );
    changed |= knob(ui, MODEL, "Seed", &mut s.seed, 0, 0..=i64::MAX, 1.0);
    if reasons || chat.thinking_budget.is_some() {
        let budget = &mut chat.thinking_budget;
        let range = 0..=131072;
        changed |= knob(ui, "no bound", "Thinking budget", budget, 1024, range, 4.0);
    }
    changed |= stop_strings(ui, &chat.id, &mut s.stop);
    changed |= reply_format(ui, &chat.id, &mut chat.format);
    if adapters.is_some() || chat.lora.is_some() {
        ui.horizontal(|ui| {
            let label = ui.label("LoRA adapter");
            egui::ComboBox::from_id_salt(("lora", &chat.id))
                .selected_text(chat.lora.as_deref().unwrap_or("none"))
                .show_ui(ui, |ui| {
                    changed |= ui.selectable_value(&mut chat.lora, None, "none").changed();
                    for n in adapters.iter().flatten() {
                        let pick = Some(n.clone());
                        changed |= ui.selectable_value(&mut chat.lora, pick, n).changed();
                    }
                })
                .response
                .labelled_by(label.id);
        });
    }
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

/// A knob that is either `unset` (unchecked; what the model's default is called, say) or a
/// value.
fn knob<T: egui::emath::Numeric>(
    ui: &mut egui::Ui,
    unset: &str,
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
                ui.weak(unset);
            }
        }
    });
    changed
}
