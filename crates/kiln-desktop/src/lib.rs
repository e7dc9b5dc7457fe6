//! kiln's desktop chat app: egui on eframe, the engine in-process on its own thread and its
//! own wgpu device. `app` holds the state and the actions, `ui/` draws them, `model` opens a
//! model in the background (on the engine's device, `device`), `reply` streams one reply, `store` keeps chats and settings on
//! disk, `attach` puts text files into messages, `lora` loads adapters into the open model,
//! `api` serves the same engine as the
//! OpenAI-compatible API, `script` drives the window for screenshots, `fonts` adds the icons
//! egui's fonts lack.

pub mod api;
pub mod app;
pub mod attach;
pub mod device;
pub mod fonts;
mod lora;
pub mod model;
mod replies;
pub mod reply;
pub mod reply_format;
pub mod script;
pub mod store;
mod ui;

pub use app::{DesktopApp, ModelState};
