//! Undoing a step the runner could not run (an error, a lost device): the scheduler's state
//! must stay consistent so that the engine goes on serving every other request.

use super::Scheduler;
use crate::output::ScheduledStep;

impl Scheduler {
    /// Ends a step whose forward pass failed instead of [`Scheduler::update`]. Every request of
    /// the step is removed and its blocks freed (what it computed this step is lost, and its
    /// earlier blocks may have been read by a half-run step); the prefix-cache entries that
    /// the step's block copies were to fill are dropped, since the copies may not have
    /// happened. Requests not in the step are untouched. Returns the removed ids, in batch
    /// order (requests aborted during the step are skipped). O(step sequences + copies).
    /// A committed step may fail too (its blocks were never registered); when the step after
    /// it was already scheduled, that one read its outputs and must fail as well.
    pub fn fail_step(&mut self, step: ScheduledStep) -> Vec<u64> {
        if step.committed {
            assert!(self.unresolved, "fail_step() of a resolved step");
            self.unresolved = false;
        } else {
            assert!(self.scheduled, "fail_step() without a scheduled step");
            self.scheduled = false;
        }
        let mut failed = Vec::with_capacity(step.seqs.len());
        for s in &step.seqs {
            let Some(mut st) = self.requests.remove(&s.id) else {
                continue;
            };
            self.rows.release(&mut st.table);
            self.running.retain(|&x| x != s.id);
            self.waiting.retain(|&x| x != s.id);
            self.kv.release(&st.blocks);
            failed.push(s.id);
        }
        self.kv
            .forget_copies(&step.batch.swap_in, &step.batch.swap_out);
        // The step's adapter loads may not have been written.
        for load in &step.lora_loads {
            self.lora.forget(load.id);
        }
        self.stats.num_failed_steps += 1;
        self.stats.num_failed_requests += failed.len() as u64;
        failed
    }

    /// Whether a step is scheduled or committed and not yet resolved or failed.
    pub fn in_flight(&self) -> bool {
        self.scheduled || self.unresolved
    }
}
