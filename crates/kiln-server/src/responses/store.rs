//! Stored responses: what `previous_response_id` continues and `GET /v1/responses/{id}`
//! returns. Each holds its own turn's items (the input it was sent and the output it gave) and
//! its predecessor, so a long agent loop keeps each turn once however many responses continue
//! it. A background response is kept from its start (`start`), and as a stored response too
//! once it ends. Memory holds at most the store's capacity (`--responses-store`), forgetting
//! the oldest first (never a background response still running); a forgotten response's turns
//! live on in the responses that continue it. With a directory (`--responses-dir`) each stored
//! response is also written there as `{id}.json` (its turn, its response and its
//! predecessor's id), and one not in memory is read back from it, its chain with it: stored
//! responses outlive a restart and are shared by servers given the same directory.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::background::Background;

/// One stored response.
pub struct Stored {
    pub previous: Option<Arc<Stored>>,
    /// This turn's input items, then its output items.
    pub items: Vec<Value>,
    /// The response object as it was answered.
    pub response: Value,
}

impl Stored {
    /// The whole conversation up to and including this response, as items.
    pub fn conversation(&self) -> Vec<Value> {
        let mut turns = vec![&self.items];
        let mut at = self.previous.as_deref();
        while let Some(s) = at {
            turns.push(&s.items);
            at = s.previous.as_deref();
        }
        turns.into_iter().rev().flatten().cloned().collect()
    }
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Arc<Stored>>,
    background: HashMap<String, Arc<Background>>,
    /// Every id kept, once, oldest first.
    order: VecDeque<String>,
}

impl Inner {
    fn keep(&mut self, id: &str, capacity: usize) {
        if !self.order.iter().any(|i| i == id) {
            self.order.push_back(id.to_string());
        }
        let mut turns = self.order.len();
        while self.order.len() > capacity && turns > 0 {
            turns -= 1;
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if self.background.get(&old).is_some_and(|b| !b.ended()) {
                self.order.push_back(old);
                continue;
            }
            self.by_id.remove(&old);
            self.background.remove(&old);
        }
    }
}

pub struct ResponseStore {
    capacity: usize,
    /// Where stored responses are also written, and read back from.
    dir: Option<PathBuf>,
    inner: Mutex<Inner>,
}

/// Whether `id` can name a file in the store's directory (what kiln's ids are made of; any
/// other id, one with a path separator say, is simply not found).
fn file_name_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ResponseStore {
    /// A store of `capacity` responses in memory, written to `dir` too when given (made if
    /// missing).
    pub fn new(capacity: usize, dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(d) = &dir {
            std::fs::create_dir_all(d).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("responses directory {}: {e}", d.display()),
                )
            })?;
        }
        Ok(ResponseStore {
            capacity,
            dir,
            inner: Mutex::default(),
        })
    }

    /// Whether the store keeps anything.
    pub fn enabled(&self) -> bool {
        self.capacity > 0 || self.dir.is_some()
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        let dir = self.dir.as_deref()?;
        file_name_ok(id).then(|| dir.join(format!("{id}.json")))
    }

    /// The stored response `id`, once it has ended: from memory, or read back from the
    /// directory with the responses before it.
    pub fn get(&self, id: &str) -> Option<Arc<Stored>> {
        if let Some(s) = self.inner.lock().unwrap().by_id.get(id) {
            return Some(s.clone());
        }
        self.dir.as_ref()?;
        // The chain back to a response in memory (or its start), newest first.
        let mut files = Vec::new();
        let mut at = Some(id.to_string());
        let mut base = None;
        while let Some(next) = at.take() {
            if let Some(s) = self.inner.lock().unwrap().by_id.get(&next) {
                base = Some(s.clone());
                break;
            }
            let file = read_turn(&self.path(&next)?)?;
            at = file["previous"].as_str().map(String::from);
            files.push((next, file));
        }
        let mut inner = self.inner.lock().unwrap();
        for (id, mut file) in files.into_iter().rev() {
            let stored = Arc::new(Stored {
                previous: base.take(),
                items: serde_json::from_value(file["items"].take()).ok()?,
                response: file["response"].take(),
            });
            inner.by_id.insert(id.clone(), stored.clone());
            inner.keep(&id, self.capacity.max(1));
            base = Some(stored);
        }
        base
    }

    /// The background response `id`, running or ended.
    pub fn background(&self, id: &str) -> Option<Arc<Background>> {
        self.inner.lock().unwrap().background.get(id).cloned()
    }

    pub fn insert(&self, id: String, stored: Stored) {
        if !self.enabled() {
            return;
        }
        if let Some(path) = self.path(&id) {
            let previous = stored.previous.as_ref().map(|p| p.response["id"].clone());
            let file =
                json!({"previous": previous, "items": stored.items, "response": stored.response});
            // Written whole, then renamed: a reader never sees half a file.
            let part = path.with_extension("json.part");
            let written = std::fs::write(&part, file.to_string())
                .and_then(|()| std::fs::rename(&part, &path));
            if let Err(e) = written {
                tracing::error!("response {id} not written to {}: {e}", path.display());
            }
        }
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        inner.by_id.insert(id.clone(), Arc::new(stored));
        inner.keep(&id, self.capacity);
    }

    /// Keeps a background response from its start.
    pub fn start(&self, id: String, bg: Arc<Background>) {
        let mut inner = self.inner.lock().unwrap();
        inner.background.insert(id.clone(), bg);
        inner.keep(&id, self.capacity);
    }

    /// Forgets `id` (its file too); whether it was kept.
    pub fn remove(&self, id: &str) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let mut found = inner.by_id.remove(id).is_some() | inner.background.remove(id).is_some();
        if found {
            inner.order.retain(|i| i != id);
        }
        if let Some(path) = self.path(id) {
            found |= std::fs::remove_file(path).is_ok();
        }
        found
    }
}

/// A stored response's file; `None` when it is missing or unreadable (logged, as a response
/// not found).
fn read_turn(path: &Path) -> Option<Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::error!("{}: {e}", path.display());
            return None;
        }
    };
    serde_json::from_str(&text)
        .map_err(|e| tracing::error!("{}: not a stored response: {e}", path.display()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_chain_outlives_its_forgotten_start() {
        let store = ResponseStore::new(2, None).unwrap();
        let mut previous = None;
        for turn in 0..3 {
            let id = format!("r{turn}");
            store.insert(
                id.clone(),
                Stored {
                    previous: previous.take(),
                    items: vec![json!(turn * 2), json!(turn * 2 + 1)],
                    response: json!({"id": id}),
                },
            );
            previous = store.get(&id);
        }
        assert!(store.get("r0").is_none(), "the oldest is forgotten");
        let last = store.get("r2").unwrap();
        assert_eq!(
            last.conversation(),
            (0..6).map(|i| json!(i)).collect::<Vec<_>>()
        );
        assert!(store.remove("r1") && !store.remove("r1"));
        assert_eq!(store.get("r2").unwrap().conversation().len(), 6);
        let off = ResponseStore::new(0, None).unwrap();
        off.insert(
            "x".into(),
            Stored {
                previous: None,
                items: vec![],
                response: json!({}),
            },
        );
        assert!(!off.enabled() && off.get("x").is_none());
    }

    #[test]
    fn a_directory_keeps_chains_across_stores() {
        let dir = tempfile::tempdir().unwrap();
        let first = ResponseStore::new(1, Some(dir.path().to_path_buf())).unwrap();
        let mut previous = None;
        for turn in 0..3 {
            let id = format!("resp_{turn}");
            first.insert(
                id.clone(),
                Stored {
                    previous: previous.take(),
                    items: vec![json!(turn)],
                    response: json!({"id": id}),
                },
            );
            previous = first.get(&id);
        }
        // Memory holds one, the directory all three: the oldest is read back with its chain.
        assert_eq!(
            first.get("resp_1").unwrap().conversation(),
            [json!(0), json!(1)]
        );
        // Another store over the same directory (a restart): the whole chain.
        let second = ResponseStore::new(4, Some(dir.path().to_path_buf())).unwrap();
        let last = second.get("resp_2").unwrap();
        assert_eq!(last.conversation(), [json!(0), json!(1), json!(2)]);
        assert_eq!(last.response["id"], "resp_2");
        // Forgotten: gone from the directory too; a broken chain is not found.
        assert!(second.remove("resp_0"));
        let third = ResponseStore::new(4, Some(dir.path().to_path_buf())).unwrap();
        assert!(third.get("resp_2").is_none() && third.get("resp_0").is_none());
        // Ids that are not file names are never looked up.
        for bad in ["../resp_1", "a/b", "", "resp_1.json"] {
            assert!(third.get(bad).is_none() && !third.remove(bad), "{bad}");
        }
    }
}
