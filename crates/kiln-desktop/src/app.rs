//! The app's state and what the user can do with it; drawing is in `ui/`. Chats live in
//! memory and on disk (every change saved at once); each chat has at most one reply being
//! generated, and replies of several chats run at the same time in the same engine.

use std::collections::HashMap;
use std::path::PathBuf;

use eframe::egui;

use crate::api::Api;
use crate::attach::Attachment;
use crate::model::{LoadEvent, Loaded};
use crate::reply::{Generation, Poll};
use crate::store::{Chat, Settings, Store};

/// The model slot: nothing yet, loading, ready, or the reason it failed.
pub enum ModelState {
    None,
    Loading {
        path: PathBuf,
        events: flume::Receiver<LoadEvent>,
        stage: &'static str,
        fraction: f32,
    },
    Ready(Loaded),
    Failed {
        path: PathBuf,
        error: String,
    },
}

pub struct DesktopApp {
    pub store: Store,
    pub settings: Settings,
    pub chats: Vec<Chat>,
    /// Index into `chats`.
    pub current: usize,
    pub model: ModelState,
    /// Replies in progress, by chat id.
    pub generating: HashMap<String, Generation>,
    /// The message being written.
    pub input: String,
    /// Text files to send with it.
    pub attachments: Vec<Attachment>,
    /// The model path field.
    pub path_input: String,
    /// Problems to show in the window (a chat file unreadable, a reply failed).
    pub notices: Vec<String>,
    /// The chat being renamed, with the new title so far.
    pub renaming: Option<(usize, String)>,
    pub markdown: egui_commonmark::CommonMarkCache,
    /// The local OpenAI-compatible API, while it is switched on.
    pub api: Option<Api>,
    /// The window's device when the engine shares it.
    pub shared_gpu: Option<kiln_gpu::GpuContext>,
    /// A scripted run's steps (`--prompt`, `--screenshot`).
    pub script: Option<crate::script::Script>,
    /// The LoRA adapter path field.
    pub lora_input: String,
    /// The answer to loading or unloading a LoRA adapter, while it is on its way.
    pub(crate) lora_job: Option<flume::Receiver<Result<(), String>>>,
    /// The answer to "Empty the KV cache", while it is on its way.
    emptying: Option<flume::Receiver<Result<kiln_server::CacheReset, String>>>,
    /// What the last "Empty the KV cache" let go of.
    pub emptied: Option<kiln_server::CacheReset>,
    pub(crate) repaint: egui::Context,
}

impl DesktopApp {
    /// The app over `store`; loads `model` when given, else the last model opened. The engine
    /// runs on `shared_gpu` (the window's device) when given, else on a device of its own.
    pub fn new(
        store: Store,
        model: Option<PathBuf>,
        shared_gpu: Option<kiln_gpu::GpuContext>,
        ctx: &egui::Context,
    ) -> DesktopApp {
        let mut notices = Vec::new();
        let settings = store.load_settings().unwrap_or_else(|e| {
            notices.push(e.to_string());
            Settings::default()
        });
        let (mut chats, errors) = store.load_chats();
        notices.extend(errors);
        if chats.is_empty() {
            chats.push(Chat::new());
        }
        let mut app = DesktopApp {
            store,
            current: chats.len() - 1,
            chats,
            model: ModelState::None,
            generating: HashMap::new(),
            input: String::new(),
            attachments: Vec::new(),
            path_input: String::new(),
            notices,
            renaming: None,
            markdown: Default::default(),
            api: None,
            shared_gpu,
            script: None,
            emptying: None,
            lora_input: String::new(),
            lora_job: None,
            emptied: None,
            repaint: ctx.clone(),
            settings,
        };
        crate::fonts::install(ctx);
        app.apply_style(ctx);
        if let Some(p) = model.or_else(|| app.settings.last_model.clone()) {
            app.open_model(p);
        }
        app
    }

    pub fn apply_style(&self, ctx: &egui::Context) {
        ctx.set_theme(if self.settings.dark {
            egui::Theme::Dark
        } else {
            egui::Theme::Light
        });
        let size = self.settings.font_size;
        ctx.all_styles_mut(|s| {
            for (style, font) in s.text_styles.iter_mut() {
                font.size = match style {
                    egui::TextStyle::Heading => size * 1.4,
                    egui::TextStyle::Small => size * 0.75,
                    _ => size,
                };
            }
        });
    }

    pub fn loaded(&self) -> Option<&Loaded> {
        match &self.model {
            ModelState::Ready(m) => Some(m),
            _ => None,
        }
    }

    pub fn chat(&self) -> &Chat {
        &self.chats[self.current]
    }

    /// Starts loading the model at `path`, replacing the current one: its replies are stopped
    /// and the API, which serves its engine, is switched off.
    pub fn open_model(&mut self, path: PathBuf) {
        self.stop_all();
        if let Some(api) = self.api.take() {
            api.stop();
        }
        let repaint = self.repaint.clone();
        let s = &self.settings;
        let options = crate::model::EngineOptions {
            kv_bytes: s.kv_memory_mib << 20,
            kv_dtype: s.kv_dtype,
            guesses: s.speculative_tokens,
            kv_disk: (s.kv_disk_mib > 0)
                .then(|| (self.store.dir().join("kv-cache"), s.kv_disk_mib << 20)),
            lora: (s.lora_slots > 0).then_some(kiln_engine::LoraCapacity {
                slots: s.lora_slots,
                rank: s.lora_rank,
            }),
        };
        let gpu = self.shared_gpu.clone();
        let events = crate::model::load(path.clone(), options, gpu, move || {
            repaint.request_repaint()
        });
        self.path_input = path.display().to_string();
        self.model = ModelState::Loading {
            path,
            events,
            stage: "reading",
            fraction: 0.0,
        };
    }

    /// Gives the loaded engine the "GPU memory back after idle" setting.
    pub fn apply_sleep_setting(&self) {
        if let Some(m) = self.loaded() {
            let s = self.settings.sleep_after_idle_s;
            m.engine
                .sleep_after_idle((s > 0).then(|| std::time::Duration::from_secs(s)));
        }
    }

    /// Empties the engine's KV cache of every block no reply holds, in memory and in the
    /// disk cache's folder; `emptied` says what it let go (a notice, what went wrong).
    pub fn empty_kv_cache(&mut self) {
        let ModelState::Ready(m) = &self.model else {
            return;
        };
        let (engine, repaint) = (m.engine.clone(), self.repaint.clone());
        let (tx, rx) = flume::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(pollster::block_on(engine.reset_prefix_cache()));
            repaint.request_repaint();
        });
        self.emptying = Some(rx);
    }

    /// Whether "Empty the KV cache" is still on its way.
    pub fn emptying(&self) -> bool {
        self.emptying.is_some()
    }

    /// Takes load progress and reply text that arrived since the last frame.
    pub fn poll(&mut self) {
        self.poll_lora();
        if let Some(answer) = self.emptying.as_ref().and_then(|rx| rx.try_recv().ok()) {
            self.emptying = None;
            match answer {
                Ok(r) => self.emptied = Some(r),
                Err(e) => self
                    .notices
                    .push(format!("emptying the KV cache failed: {e}")),
            }
        }
        if let ModelState::Loading {
            path,
            events,
            stage,
            fraction,
        } = &mut self.model
        {
            let path = path.clone();
            let mut done = None;
            while let Ok(e) = events.try_recv() {
                match e {
                    LoadEvent::Progress {
                        stage: s,
                        fraction: f,
                    } => (*stage, *fraction) = (s, f),
                    LoadEvent::Done(r) => done = Some(r),
                }
            }
            match done {
                Some(Ok(m)) => {
                    self.settings.opened(&path);
                    self.save_settings();
                    self.model = ModelState::Ready(m);
                    self.apply_sleep_setting();
                }
                Some(Err(error)) => self.model = ModelState::Failed { path, error },
                None => {}
            }
        }
        let ModelState::Ready(model) = &self.model else {
            return;
        };
        let mut finished = Vec::new();
        for (chat_id, g) in self.generating.iter_mut() {
            let Some(chat) = self.chats.iter_mut().find(|c| c.id == *chat_id) else {
                continue;
            };
            let Some(reply) = chat.messages.last_mut() else {
                continue;
            };
            match g.poll(model) {
                Poll::Text(t) => {
                    reply.reasoning += &t.reasoning;
                    reply.text += &t.content;
                }
                Poll::Done(t, stats) => {
                    reply.reasoning += &t.reasoning;
                    reply.text += &t.content;
                    reply.stats = Some(stats);
                    finished.push(chat_id.clone());
                }
                Poll::Failed(e) => {
                    self.notices.push(format!("{}: {e}", chat.title));
                    finished.push(chat_id.clone());
                }
            }
        }
        for id in finished {
            self.generating.remove(&id);
            self.save_chat_id(&id);
        }
    }

    pub fn new_chat(&mut self) {
        let mut chat = Chat::new();
        // A new chat keeps the current one's settings.
        chat.system = self.chat().system.clone();
        chat.sampling = self.chat().sampling.clone();
        self.chats.push(chat);
        self.current = self.chats.len() - 1;
        self.save_current();
    }

    pub fn delete_chat(&mut self, index: usize) {
        let id = self.chats[index].id.clone();
        self.stop_chat(&id);
        if let Err(e) = self.store.delete_chat(&id) {
            self.notices.push(e.to_string());
        }
        self.chats.remove(index);
        if self.chats.is_empty() {
            self.chats.push(Chat::new());
        }
        self.current = self.current.min(self.chats.len() - 1);
    }

    /// Writes the current chat to `path`: as an API request body when the name ends in
    /// `.json` (for the loaded model, by its served name), as Markdown otherwise.
    pub fn export(&mut self, path: PathBuf) {
        let text = if path.extension().is_some_and(|e| e == "json") {
            let model = self.loaded().map_or("kiln", |m| m.info.name.as_str());
            let body = self.chat().to_request(model);
            serde_json::to_string_pretty(&body).unwrap_or_default()
        } else {
            self.chat().to_markdown()
        };
        if let Err(e) = std::fs::write(&path, text) {
            self.notices
                .push(format!("cannot write {}: {e}", path.display()));
        }
    }

    pub fn save_current(&mut self) {
        let id = self.chat().id.clone();
        self.save_chat_id(&id);
    }

    pub(crate) fn save_chat_id(&mut self, id: &str) {
        if let Some(c) = self.chats.iter().find(|c| c.id == id)
            && let Err(e) = self.store.save_chat(c)
        {
            self.notices.push(e.to_string());
        }
    }

    pub fn save_settings(&mut self) {
        if let Err(e) = self.store.save_settings(&self.settings) {
            self.notices.push(e.to_string());
        }
    }
}

impl DesktopApp {
    /// Draws one frame (and takes what arrived since the last).
    pub fn show(&mut self, ui: &mut egui::Ui) {
        crate::ui::show(self, ui);
    }
}

impl eframe::App for DesktopApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
        if let Some(mut script) = self.script.take() {
            script.frame(self, ui.ctx());
            self.script = Some(script);
        }
    }

    fn on_exit(&mut self) {
        if let Some(api) = self.api.take() {
            api.stop();
        }
        self.stop_all();
    }
}
