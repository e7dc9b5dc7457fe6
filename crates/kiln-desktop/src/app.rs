//! The app's state and what the user can do with it; drawing is in `ui/`. Chats live in
//! memory and on disk (every change saved at once); each chat has at most one reply being
//! generated, and replies of several chats run at the same time in the same engine.

use std::collections::HashMap;
use std::path::PathBuf;

use eframe::egui;

use crate::api::Api;
use crate::attach::{self, Attachment};
use crate::model::{LoadEvent, Loaded};
use crate::reply::{Generation, Poll};
use crate::store::{Chat, Message, Settings, Store};

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
    repaint: egui::Context,
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
        let (kv, guesses, gpu) = (
            s.kv_memory_mib << 20,
            s.speculative_tokens,
            &self.shared_gpu,
        );
        let events = crate::model::load(path.clone(), kv, guesses, gpu.clone(), move || {
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

    /// Takes load progress and reply text that arrived since the last frame.
    pub fn poll(&mut self) {
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

    pub fn is_generating(&self) -> bool {
        self.generating.contains_key(&self.chat().id)
    }

    /// Sends the input as the current chat's next user message.
    pub fn send(&mut self) {
        let text = attach::compose(&self.input, &self.attachments);
        if text.is_empty() || self.is_generating() || self.loaded().is_none() {
            return;
        }
        let chat = &mut self.chats[self.current];
        if chat.messages.is_empty() && chat.title == "New chat" {
            let input = self.input.trim();
            let first = self.attachments.first().map(|a| a.name.as_str());
            let title = if input.is_empty() {
                first.unwrap_or("")
            } else {
                input
            };
            chat.title = title.chars().take(40).collect();
        }
        self.attachments.clear();
        chat.messages.push(Message {
            role: "user".into(),
            text,
            ..Message::default()
        });
        self.input.clear();
        self.start_reply();
    }

    /// Attaches the text file at `path` to the message being written, or says in the window
    /// why it cannot.
    pub fn attach(&mut self, path: &std::path::Path) {
        match attach::read(path) {
            Ok(a) => self.attachments.push(a),
            Err(e) => self.notices.push(e),
        }
    }

    /// Starts the assistant's reply to the current chat as it stands.
    fn start_reply(&mut self) {
        let Some(model) = self.loaded() else {
            return;
        };
        match Generation::start(model, self.chat()) {
            Ok(g) => {
                let chat = &mut self.chats[self.current];
                chat.messages.push(Message {
                    role: "assistant".into(),
                    ..Message::default()
                });
                self.generating.insert(chat.id.clone(), g);
            }
            Err(e) => self.notices.push(e),
        }
        self.save_current();
    }

    /// Stops the current chat's reply; what it wrote stays.
    pub fn stop(&mut self) {
        let id = self.chat().id.clone();
        self.stop_chat(&id);
    }

    fn stop_chat(&mut self, id: &str) {
        let (Some(g), ModelState::Ready(model)) = (self.generating.remove(id), &self.model) else {
            return;
        };
        let stats = g.stop(model);
        if let Some(reply) = self
            .chats
            .iter_mut()
            .find(|c| c.id == id)
            .and_then(|c| c.messages.last_mut())
        {
            reply.stats = Some(stats);
        }
        self.save_chat_id(id);
    }

    fn stop_all(&mut self) {
        let ids: Vec<String> = self.generating.keys().cloned().collect();
        for id in ids {
            self.stop_chat(&id);
        }
    }

    /// Replaces the last reply with a new one.
    pub fn regenerate(&mut self) {
        if self.is_generating() {
            return;
        }
        let chat = &mut self.chats[self.current];
        if chat.messages.last().is_some_and(|m| m.role == "assistant") {
            chat.messages.pop();
        }
        if chat.messages.last().is_some_and(|m| m.role == "user") {
            self.start_reply();
        }
    }

    /// Takes user message `index` back into the input, dropping it and all after it.
    pub fn edit(&mut self, index: usize) {
        if self.is_generating() {
            return;
        }
        let chat = &mut self.chats[self.current];
        if let Some(m) = chat.messages.get(index) {
            self.input = m.text.clone();
            chat.messages.truncate(index);
            self.save_current();
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

    fn save_chat_id(&mut self, id: &str) {
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
