#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]
//! `kiln-desktop [--model PATH] [--data-dir DIR]`: the chat window.

use std::path::PathBuf;

use clap::Parser;
use eframe::egui;
use kiln_desktop::DesktopApp;
use kiln_desktop::script::Script;
use kiln_desktop::store::Store;

#[derive(Parser)]
#[command(name = "kiln-desktop", about = "kiln's desktop chat app")]
struct Args {
    /// A GGUF file or a Hugging Face model folder to open (default: the last model opened).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Where chats and settings are kept (default: kiln-desktop in the platform's data folder).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Once the model is open, send this message in a new chat (repeat it for several chats
    /// at once).
    #[arg(long)]
    prompt: Vec<String>,
    /// Once the model is open and every reply has finished, save the window to this PNG file
    /// and quit.
    #[arg(long)]
    screenshot: Option<PathBuf>,
    /// With --prompt: draw continuously while the reply is generated and report the frame
    /// rate the window keeps (a benchmark).
    #[arg(long)]
    frame_rate: bool,
}

fn main() -> anyhow::Result<()> {
    let launched = std::time::Instant::now();
    let args = Args::parse();
    let store = Store::open(args.data_dir)?;
    let share = store.load_settings().is_ok_and(|s| s.share_device);
    let mut options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("kiln")
            .with_inner_size([1100.0, 720.0])
            .with_drag_and_drop(true),
        ..Default::default()
    };
    if share {
        options.wgpu_options = kiln_desktop::device::shared_setup();
    }
    let script = Script::new(args.prompt, args.screenshot, args.frame_rate, launched);
    let outcome = script.as_ref().map(|s| s.outcome.clone());
    eframe::run_native(
        "kiln",
        options,
        Box::new(move |cc| {
            let gpu =
                cc.wgpu_render_state.as_ref().filter(|_| share).map(|rs| {
                    kiln_desktop::device::shared_context(&rs.adapter, &rs.device, &rs.queue)
                });
            let mut app = DesktopApp::new(store, args.model, gpu, &cc.egui_ctx);
            app.script = script;
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| anyhow::anyhow!("the window could not start: {e}"))?;
    match outcome.and_then(|o| o.lock().ok()?.take()) {
        Some(why) => anyhow::bail!(why),
        None => Ok(()),
    }
}
