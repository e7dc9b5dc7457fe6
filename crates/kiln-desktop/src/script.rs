//! Scripted runs of the real window (`--prompt`, `--screenshot`): send one message once the
//! model is open, wait for every reply to finish, save the window as a PNG, and quit. Used for
//! README's screenshot and the window test under Xvfb.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eframe::egui;

use crate::app::{DesktopApp, ModelState};

/// Frames drawn after the last reply before the picture is taken (layout settles).
const SETTLE_FRAMES: u32 = 5;

pub struct Script {
    /// Each sent in its own new chat, all at once.
    prompts: Vec<String>,
    /// When they were sent, and the chats they went to.
    sent: Option<Instant>,
    chats: Vec<String>,
    screenshot: Option<PathBuf>,
    phase: Phase,
    /// What went wrong, for `main` to report once the window closes.
    pub outcome: Arc<Mutex<Option<String>>>,
    launched: Instant,
    /// Draw continuously while the reply is generated, and report the frame rate.
    measure_frames: bool,
    /// Frame times while the reply was generated.
    reply_frames: Vec<Instant>,
}

enum Phase {
    WaitingForModel,
    Replying,
    Settling(u32),
    Shooting(flume::Receiver<Result<(), String>>),
    Done,
}

impl Script {
    /// `launched`: when the process started (the first frame's delay is reported from it).
    pub fn new(
        prompts: Vec<String>,
        screenshot: Option<PathBuf>,
        measure_frames: bool,
        launched: Instant,
    ) -> Option<Script> {
        (!prompts.is_empty() || screenshot.is_some()).then(|| Script {
            measure_frames,
            prompts,
            sent: None,
            chats: Vec::new(),
            screenshot,
            phase: Phase::WaitingForModel,
            outcome: Default::default(),
            launched,
            reply_frames: Vec::new(),
        })
    }

    /// Moves the script on after a frame. While the reply is generated the window draws when
    /// text arrives, or continuously when measuring (the frame rate it can keep while the
    /// engine works).
    pub fn frame(&mut self, app: &mut DesktopApp, ctx: &egui::Context) {
        if !matches!(self.phase, Phase::Replying) || self.measure_frames {
            ctx.request_repaint();
        }
        if ctx.cumulative_frame_nr() == 0 {
            eprintln!(
                "first frame {:.0} ms after launch",
                self.launched.elapsed().as_secs_f64() * 1e3
            );
        }
        if matches!(self.phase, Phase::Replying) && self.measure_frames {
            self.reply_frames.push(Instant::now());
        }
        self.phase = match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::WaitingForModel => match &app.model {
                ModelState::Ready(_) => {
                    self.sent = Some(Instant::now());
                    for p in std::mem::take(&mut self.prompts) {
                        app.new_chat();
                        app.input = p;
                        app.send();
                        self.chats.push(app.chat().id.clone());
                    }
                    Phase::Replying
                }
                ModelState::Loading { .. } => Phase::WaitingForModel,
                ModelState::Failed { error, .. } => {
                    self.fail(format!("the model did not open: {error}"));
                    Phase::Settling(0)
                }
                ModelState::None => Phase::Settling(0),
            },
            Phase::Replying if app.generating.is_empty() => {
                self.report_frames();
                self.report_replies(app);
                Phase::Settling(0)
            }
            Phase::Replying => Phase::Replying,
            Phase::Settling(n) if n < SETTLE_FRAMES => Phase::Settling(n + 1),
            Phase::Settling(_) => match self.screenshot.clone() {
                Some(path) => {
                    let (tx, rx) = flume::bounded(1);
                    let c = ctx.clone();
                    ctx.request_screenshot(move |image| {
                        let _ = tx.send(save_png(&image, &path));
                        c.request_repaint();
                    });
                    Phase::Shooting(rx)
                }
                None => {
                    ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                    Phase::Done
                }
            },
            Phase::Shooting(rx) => match rx.try_recv() {
                Ok(r) => {
                    if let Err(e) = r {
                        self.fail(e);
                    }
                    ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                    Phase::Done
                }
                Err(_) => Phase::Shooting(rx),
            },
            Phase::Done => Phase::Done,
        };
    }

    /// The window's frame rate while the reply was generated.
    fn report_frames(&self) {
        let f = &self.reply_frames;
        if f.len() < 2 {
            return;
        }
        let span = (f[f.len() - 1] - f[0]).as_secs_f64();
        let longest = f
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(Duration::ZERO);
        eprintln!(
            "while replying: {} frames in {span:.1} s ({:.1} frames/s), longest frame {:.0} ms",
            f.len(),
            (f.len() - 1) as f64 / span.max(1e-9),
            longest.as_secs_f64() * 1e3
        );
    }

    /// The replies' tokens per second, each and together.
    fn report_replies(&self, app: &DesktopApp) {
        let Some(sent) = self.sent else {
            return;
        };
        let wall = sent.elapsed().as_secs_f64();
        let stats: Vec<_> = app
            .chats
            .iter()
            .filter(|c| self.chats.contains(&c.id))
            .filter_map(|c| c.messages.last()?.stats.clone())
            .collect();
        let total: usize = stats.iter().map(|s| s.generated).sum();
        for s in &stats {
            eprintln!("reply: {}", s.line());
        }
        eprintln!(
            "{} replies: {total} tokens in {wall:.1} s from send to the last token ({:.2} tokens/s together)",
            stats.len(),
            total as f64 / wall.max(1e-9)
        );
    }

    fn fail(&self, why: String) {
        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

fn save_png(image: &egui::ColorImage, path: &std::path::Path) -> Result<(), String> {
    let [w, h] = image.size;
    let bytes: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
    let img = image::RgbaImage::from_raw(w as u32, h as u32, bytes)
        .ok_or("the screenshot has the wrong size")?;
    img.save(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
