//! Stored responses, in memory: what `previous_response_id` continues and `GET
//! /v1/responses/{id}` returns. Each holds its own turn's items (the input it was sent and
//! the output it gave) and its predecessor, so a long agent loop keeps each turn once however
//! many responses continue it. A background response is kept from its start (`start`), and
//! as a stored response too once it ends. The store holds at most its capacity
//! (`--responses-store`), forgetting the oldest first (never a background response still
//! running); a forgotten response's turns live on in the responses that continue it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;

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
    inner: Mutex<Inner>,
}

impl ResponseStore {
    pub fn new(capacity: usize) -> Self {
        ResponseStore {
            capacity,
            inner: Mutex::default(),
        }
    }

    /// Whether the store keeps anything.
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// The stored response `id`, once it has ended.
    pub fn get(&self, id: &str) -> Option<Arc<Stored>> {
        self.inner.lock().unwrap().by_id.get(id).cloned()
    }

    /// The background response `id`, running or ended.
    pub fn background(&self, id: &str) -> Option<Arc<Background>> {
        self.inner.lock().unwrap().background.get(id).cloned()
    }

    pub fn insert(&self, id: String, stored: Stored) {
        if !self.enabled() {
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

    /// Forgets `id`; whether it was kept.
    pub fn remove(&self, id: &str) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let found = inner.by_id.remove(id).is_some() | inner.background.remove(id).is_some();
        if found {
            inner.order.retain(|i| i != id);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_chain_outlives_its_forgotten_start() {
        let store = ResponseStore::new(2);
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
        let off = ResponseStore::new(0);
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
}
