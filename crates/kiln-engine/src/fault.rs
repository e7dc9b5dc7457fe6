//! Fault injection for tests (cargo feature `fault-injection`; the `kiln` binary never turns
//! it on): chosen steps fail, or the device is marked lost, so that the recovery paths of the
//! engine and the server are exercised without a broken GPU.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which steps fail. Steps are counted from 1 since the engine was built.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Steps whose forward pass reports an error instead of running.
    pub fail_steps: Vec<u64>,
    /// The step at which the device is lost (its fault record says so, as wgpu's callback
    /// would, and the step fails).
    pub lose_device_at: Option<u64>,
    /// The step at which the engine panics (to test the supervisor above it).
    pub panic_at: Option<u64>,
    /// Set from outside (a test driving load) to lose the device at the next step.
    pub lose_device_now: Option<Arc<AtomicBool>>,
}

/// What the plan does to step `n`.
pub(crate) enum Injected {
    FailStep,
    LoseDevice,
}

impl FaultPlan {
    pub(crate) fn at(&self, n: u64) -> Option<Injected> {
        if self.panic_at == Some(n) {
            panic!("injected panic at step {n}");
        }
        let now = self
            .lose_device_now
            .as_ref()
            .is_some_and(|f| f.swap(false, Ordering::SeqCst));
        if now || self.lose_device_at == Some(n) {
            Some(Injected::LoseDevice)
        } else if self.fail_steps.contains(&n) {
            Some(Injected::FailStep)
        } else {
            None
        }
    }
}
