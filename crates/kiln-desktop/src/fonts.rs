//! Fonts the window adds to egui's: `assets/kiln-icons.ttf`, the project's own outlines of
//! the icons egui's bundled fonts lack (the copy icon egui_commonmark puts on code blocks,
//! U+1F5D0, and the check mark it shows once copied, U+2714), made by `scripts/make-icon-font.py`. Text in other scripts comes from the
//! system's fonts (eframe's `system_fonts`).

use eframe::egui;
use egui::epaint::text::{FontInsert, FontPriority, InsertFontFamily};
use egui::{FontData, FontFamily};

const ICONS: &[u8] = include_bytes!("../assets/kiln-icons.ttf");

/// Adds the icon font to `ctx`, after every font of both families.
pub fn install(ctx: &egui::Context) {
    let families = [FontFamily::Proportional, FontFamily::Monospace]
        .into_iter()
        .map(|family| InsertFontFamily {
            family,
            priority: FontPriority::Lowest,
        })
        .collect();
    ctx.add_font(FontInsert::new(
        "kiln-icons",
        FontData::from_static(ICONS),
        families,
    ));
}
