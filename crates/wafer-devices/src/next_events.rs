//! The next events of a group of devices, side by side.
//!
//! An array's driving loop asks, several times a step, which of its devices
//! changes state first. Asking each model, or reading an `Option` kept in
//! each disk's bookkeeping, walks a cache line or more per disk. Here the
//! times sit in one short array of plain nanoseconds (idle as `u64::MAX`),
//! and the earliest is kept beside them: a device's new time either beats it
//! or, if that device held it, calls for one pass over the array. The driver
//! writes a device's entry back after every call that can change it:
//! `submit` and `advance`.

use wafer_core::units::Instant;

/// No event: the device is idle.
const IDLE: u64 = u64::MAX;

/// Each device's next event, by device index.
#[derive(Clone, Debug)]
pub struct NextEvents {
    at_ns: Vec<u64>,
    /// The least of `at_ns`, and a device holding it.
    earliest_ns: u64,
    earliest_index: usize,
}

impl NextEvents {
    /// `devices` devices, all idle.
    pub fn new(devices: usize) -> NextEvents {
        assert!(devices > 0, "a group holds at least one device");
        NextEvents {
            at_ns: vec![IDLE; devices],
            earliest_ns: IDLE,
            earliest_index: 0,
        }
    }

    /// Records device `index`'s next event, as its `next_event` says.
    pub fn set(&mut self, index: usize, next: Option<Instant>) {
        let at_ns = next.map_or(IDLE, |at| {
            assert_ne!(at.0, IDLE, "an event at the end of time");
            at.0
        });
        self.at_ns[index] = at_ns;
        if at_ns <= self.earliest_ns {
            self.earliest_ns = at_ns;
            self.earliest_index = index;
        } else if index == self.earliest_index {
            self.find_earliest();
        }
        debug_assert_eq!(
            self.at_ns.iter().min().copied(),
            self.at_ns.get(self.earliest_index).copied()
        );
    }

    /// Finds the earliest event by a pass over every device.
    fn find_earliest(&mut self) {
        let (index, &at_ns) = self
            .at_ns
            .iter()
            .enumerate()
            .min_by_key(|&(_, at)| at)
            .expect("a group holds at least one device");
        self.earliest_ns = at_ns;
        self.earliest_index = index;
    }

    /// True if device `index` has an event at or before `at`.
    pub fn due(&self, index: usize, at: Instant) -> bool {
        self.at_ns[index] <= at.0
    }

    /// The earliest event of any device, if one is not idle.
    pub fn earliest(&self) -> Option<Instant> {
        (self.earliest_ns != IDLE).then_some(Instant(self.earliest_ns))
    }
}

/// The earlier of two optional events: `None` is no event, not the earliest.
pub fn sooner<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_skips_idle_devices() {
        let mut events = NextEvents::new(3);
        assert_eq!(events.earliest(), None, "idle devices have no event");
        events.set(0, Some(Instant(50)));
        events.set(2, Some(Instant(20)));
        assert_eq!(events.earliest(), Some(Instant(20)));
        assert!(events.due(2, Instant(20)) && !events.due(0, Instant(20)));
        assert!(!events.due(1, Instant(u64::MAX - 1)), "idle is never due");
        events.set(2, None);
        assert_eq!(events.earliest(), Some(Instant(50)), "the earliest left");
        events.set(1, Some(Instant(70)));
        events.set(0, Some(Instant(90)));
        assert_eq!(events.earliest(), Some(Instant(70)), "the earliest moved");
    }

    #[test]
    fn no_event_is_never_the_sooner() {
        assert_eq!(sooner(Some(3), None), Some(3));
        assert_eq!(sooner(None, Some(3)), Some(3));
        assert_eq!(sooner(Some(4), Some(3)), Some(3));
        assert_eq!(sooner::<u64>(None, None), None);
    }
}
