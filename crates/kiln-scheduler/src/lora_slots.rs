//! The runner's LoRA adapter slots as the scheduler fills them. A request runs only while its
//! adapter holds a slot, so a step's requests use at most as many adapters as the runner has
//! slots, while any number may be registered (vLLM's `--max-loras`). An adapter a request
//! needs goes into an empty slot, or into the least recently used slot that no running
//! request needs; the step carries the load ([`crate::ScheduledStep::lora_loads`]) and the
//! engine writes the adapter there before the step runs. A runner built with its adapters
//! fixed cannot take loads: adapter `i` stays in slot `i`.

/// An adapter written into a slot before a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoraLoad {
    pub slot: u32,
    /// The engine's id of the adapter ([`crate::LoraRef::id`]).
    pub id: u32,
}

pub(crate) struct LoraSlots {
    /// The adapter each slot holds, with the clock of its last use.
    slots: Vec<Option<(u32, u64)>>,
    /// Whether an adapter may be loaded into a slot.
    loads: bool,
    clock: u64,
}

impl LoraSlots {
    /// `num` slots, adapters `0..resident` in slots `0..resident`.
    pub fn new(num: usize, resident: usize, loads: bool) -> Self {
        let slots = (0..num)
            .map(|s| (s < resident).then_some((s as u32, 0)))
            .collect();
        Self {
            slots,
            loads,
            clock: 0,
        }
    }

    /// The slot adapter `id` holds.
    pub fn slot_of(&self, id: u32) -> Option<u32> {
        (self.slots.iter())
            .position(|s| s.is_some_and(|(a, _)| a == id))
            .map(|s| s as u32)
    }

    /// Where adapter `id` can run, given whether running requests need each adapter: its
    /// slot, or one it can be loaded into (`true`: a load, into an empty slot if there is one,
    /// else the least recently used one whose adapter is not needed); `None` if neither.
    pub fn find(&self, id: u32, needed: impl Fn(u32) -> bool) -> Option<(u32, bool)> {
        if let Some(s) = self.slot_of(id) {
            return Some((s, false));
        }
        if !self.loads {
            return None;
        }
        let empty = self.slots.iter().position(Option::is_none);
        let stale = || {
            (self.slots.iter().enumerate())
                .filter_map(|(s, a)| a.filter(|&(a, _)| !needed(a)).map(|(_, used)| (used, s)))
                .min()
                .map(|(_, s)| s)
        };
        empty.or_else(stale).map(|s| (s as u32, true))
    }

    /// Adapter `id` holds `slot` (loaded there, or already in it) and was used now.
    pub fn hold(&mut self, slot: u32, id: u32) {
        self.clock += 1;
        self.slots[slot as usize] = Some((id, self.clock));
    }

    /// Adapter `id` leaves its slot (unloaded, or its load was not run); returns the slot.
    pub fn forget(&mut self, id: u32) -> Option<u32> {
        let s = self.slot_of(id)?;
        self.slots[s as usize] = None;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_fill_empty_slots_then_replace_the_least_recently_used_unneeded_one() {
        let mut slots = LoraSlots::new(2, 0, true);
        assert_eq!(slots.find(7, |_| false), Some((0, true)));
        slots.hold(0, 7);
        assert_eq!(slots.find(7, |_| true), Some((0, false)));
        assert_eq!(slots.find(8, |_| true), Some((1, true)));
        slots.hold(1, 8);
        // Both needed: adapter 9 waits.
        assert_eq!(slots.find(9, |_| true), None);
        // 7 was used last before 8, so it goes first, unless it is needed.
        assert_eq!(slots.find(9, |_| false), Some((0, true)));
        assert_eq!(slots.find(9, |a| a == 7), Some((1, true)));
        slots.hold(0, 7);
        assert_eq!(slots.find(9, |_| false), Some((1, true)));
        assert_eq!(slots.forget(8), Some(1));
        assert_eq!(slots.forget(8), None);
        assert_eq!(slots.find(9, |_| true), Some((1, true)));
    }

    #[test]
    fn fixed_adapters_stay_in_their_slots() {
        let slots = LoraSlots::new(3, 3, false);
        assert_eq!(slots.find(2, |_| true), Some((2, false)));
        assert_eq!(slots.find(3, |_| false), None);
    }
}
