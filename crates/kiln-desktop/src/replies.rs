//! What the user does with a chat's replies: send a message (with its attachments), stop,
//! regenerate (earlier replies kept as versions to go back to), edit and resend, and continue
//! a reply cut at its token limit or stopped.

use crate::app::{DesktopApp, ModelState};
use crate::attach;
use crate::reply::Generation;
use crate::store::Message;

impl DesktopApp {
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
        match Generation::start(model, self.chat(), false) {
            Ok(g) => {
                let chat = &mut self.chats[self.current];
                chat.context_cut = g.left_out();
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

    pub(crate) fn stop_chat(&mut self, id: &str) {
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

    pub(crate) fn stop_all(&mut self) {
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
        let old = match chat.messages.last() {
            Some(m) if m.role == "assistant" => chat.messages.pop(),
            _ => None,
        };
        if chat.messages.last().is_some_and(|m| m.role == "user") {
            self.start_reply();
        }
        // The new reply is the last of the old one's versions; where none started (an
        // error, said in a notice), the old reply stays as it was.
        if let Some(old) = old {
            let generating = self.is_generating();
            let chat = &mut self.chats[self.current];
            match chat.messages.last_mut() {
                Some(new) if generating && new.role == "assistant" => {
                    new.versions = old.all_versions();
                    new.version = new.versions.len();
                }
                _ => chat.messages.push(old),
            }
            self.save_current();
        }
    }

    /// Shows version `index` of the current chat's last reply (one regenerated).
    pub fn show_version(&mut self, index: usize) {
        if self.is_generating() {
            return;
        }
        if let Some(m) = self.chats[self.current].messages.last_mut() {
            m.show_version(index);
            self.save_current();
        }
    }

    /// Goes on writing the current chat's last reply (one cut at its token limit, or
    /// stopped): the model continues its text, which grows in place.
    pub fn continue_reply(&mut self) {
        let Some(model) = self.loaded() else {
            return;
        };
        let chat = self.chat();
        let last = chat.messages.last();
        if self.is_generating()
            || !last.is_some_and(|m| m.role == "assistant" && !m.text.is_empty())
        {
            return;
        }
        match Generation::start(model, chat, true) {
            Ok(g) => {
                let chat = &mut self.chats[self.current];
                chat.context_cut = g.left_out();
                self.generating.insert(chat.id.clone(), g);
            }
            Err(e) => self.notices.push(e),
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
}
