//! Stored responses, in memory: what `previous_response_id` continues and `GET
//! /v1/responses/{id}` returns. Each holds its own turn's items (the input it was sent and
//! the output it gave) and its predecessor, so a long agent loop keeps each turn once however
//! many responses continue it. The store holds at most its capacity (`--responses-store`),
//! forgetting the oldest first; a forgotten response's turns live on in the responses that
//! continue it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;

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
    /// Ids oldest first (deleted ones included until they come up).
    order: VecDeque<String>,
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

    pub fn get(&self, id: &str) -> Option<Arc<Stored>> {
        self.inner.lock().unwrap().by_id.get(id).cloned()
    }

    pub fn insert(&self, id: String, stored: Stored) {
        if !self.enabled() {
            return;
        }
        let mut inner = self.inner.lock().unwrap();
        inner.by_id.insert(id.clone(), Arc::new(stored));
        inner.order.push_back(id);
        while inner.by_id.len() > self.capacity {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            inner.by_id.remove(&old);
        }
    }

    /// Forgets `id`; whether it was stored.
    pub fn remove(&self, id: &str) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let found = inner.by_id.remove(id).is_some();
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
