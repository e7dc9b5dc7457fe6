//! Whether the server can take generation requests, and why not: `GET /health` answers 503
//! with the reason while the engine is down (a lost device being rebuilt, a failed start of
//! the engine thread) or while the server drains for shutdown. Also the reliability counters
//! that /metrics reports, and the count of sequences in flight that a drain waits for.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub struct Health {
    down: Mutex<Option<String>>,
    draining: AtomicBool,
    /// Steps that failed (their requests got an error), since the server started.
    pub failed_steps: AtomicU64,
    /// Times the engine was rebuilt (device loss, a panic on the engine thread).
    pub engine_restarts: AtomicU64,
    /// Sequences between submission and their end (finished, failed or dropped).
    pub in_flight: AtomicUsize,
    /// The engine sleeps: its GPU memory given back until a request or `/wake_up` wakes it.
    pub sleeping: AtomicBool,
    /// Times the engine went to sleep.
    pub sleeps: AtomicU64,
}

impl Health {
    /// `Ok` when new requests can be served; otherwise why not.
    pub fn check(&self) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err("the server is shutting down".into());
        }
        match &*self.down.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(reason) => Err(reason.clone()),
            None => Ok(()),
        }
    }

    pub fn set_down(&self, reason: impl Into<String>) {
        *self.down.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.into());
    }

    pub fn set_up(&self) {
        *self.down.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// A server started again on the same engine takes requests again.
    pub fn end_drain(&self) {
        self.draining.store(false, Ordering::SeqCst);
    }

    pub fn num_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}
