//! COMPARE AND WRITE, atomic against every other write.
//!
//! An atomic test-and-set on a LUN's bytes (VMware's ATS heartbeat, cluster
//! locks) reads the bytes, compares them with what the host expects and,
//! only if they match, writes new ones; no other write may land between the
//! read and the write. The engine thread is the one place every host write
//! passes, so the guarantee is made there: while a compare's read is with
//! the node, its byte range is *fenced*. A write or trim that overlaps a
//! fence, and a second compare that does, is *parked* in arrival order;
//! when the compare ends (its write handed to the node, or a miscompare
//! answered), the fence is lifted and the parked events are handled again,
//! in their order, before the engine takes any new one. Reads are never
//! held: a read that passes a fence sees the bytes as they were before the
//! compare, which is an order the host could have seen anyway. The node
//! applies writes in the order they are submitted, and the compare's write
//! is handled before the parked ones, so it lands first.

use std::collections::VecDeque;

use wafer_core::filer::{Change, HostRequest};
use wafer_core::nvlog::LunId;

use crate::events::Event;

/// The ranges fenced by compares under way, and what waits for them.
#[derive(Default)]
pub(super) struct Fences {
    fenced: Vec<(LunId, u64, u64)>,
    parked: VecDeque<Event>,
    /// Parked events whose fence has lifted, to handle next, in order.
    released: VecDeque<Event>,
}

impl Fences {
    /// Whether `event` must wait: a write, trim or compare over a fence.
    /// While anything is parked, everything that could conflict with it
    /// parks too, so that nothing overtakes an earlier write.
    pub(super) fn must_wait(&self, event: &Event) -> bool {
        let Some((lun, start, end)) = written_range(event) else {
            return false;
        };
        let overlaps = |(l, s, e): &(LunId, u64, u64)| *l == lun && start < *e && *s < end;
        self.fenced.iter().any(overlaps)
            || self
                .parked
                .iter()
                .filter_map(written_range)
                .any(|range| overlaps(&range))
    }

    pub(super) fn park(&mut self, event: Event) {
        self.parked.push_back(event);
    }

    /// Fences `length` bytes of `lun` at `offset` for a compare.
    pub(super) fn fence(&mut self, lun: LunId, offset: u64, length: u64) {
        self.fenced.push((lun, offset, offset + length));
    }

    /// Lifts a compare's fence: its own write, if it has one, is handled
    /// first, then every parked event, in order (those still behind another
    /// fence park again).
    pub(super) fn lift(&mut self, lun: LunId, offset: u64, write: Option<Event>) {
        if let Some(at) = self
            .fenced
            .iter()
            .position(|(l, s, _)| *l == lun && *s == offset)
        {
            self.fenced.swap_remove(at);
        }
        self.released.extend(write);
        self.released.append(&mut self.parked);
    }

    /// The next event whose fence has lifted.
    pub(super) fn next_released(&mut self) -> Option<Event> {
        self.released.pop_front()
    }
}

/// The LUN and byte range an event would write, if it writes.
fn written_range(event: &Event) -> Option<(LunId, u64, u64)> {
    match event {
        Event::Host {
            request: HostRequest::Change(Change::Write { lun, offset, data }),
            ..
        } => Some((*lun, *offset, offset + data.len() as u64)),
        Event::Host {
            request:
                HostRequest::Change(Change::Trim {
                    lun,
                    offset,
                    length,
                }),
            ..
        } => Some((*lun, *offset, offset + length)),
        Event::CompareAndWrite(compare) => Some((
            compare.target.lun,
            compare.offset,
            compare.offset + compare.expected.len() as u64,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::{Incarnations, Target};
    use crate::events::CompareRequest;
    use wafer_core::units::{FileId, VolumeId};

    fn lun(file: u32) -> LunId {
        LunId {
            volume: VolumeId(1),
            file: FileId(file),
        }
    }

    fn target(file: u32) -> Target {
        Target::live(lun(file), None, &Incarnations::default())
    }

    /// A write of `length` bytes of `byte` at `offset` of LUN `file`.
    fn write(file: u32, offset: u64, length: usize, byte: u8) -> Event {
        Event::Host {
            target: target(file),
            request: HostRequest::Change(Change::Write {
                lun: lun(file),
                offset,
                data: vec![byte; length],
            }),
            done: Box::new(|_| {}),
        }
    }

    fn compare(file: u32, offset: u64, length: usize) -> Event {
        Event::CompareAndWrite(Box::new(CompareRequest {
            target: target(file),
            offset,
            expected: vec![0; length],
            data: vec![1; length],
            done: Box::new(|_| {}),
        }))
    }

    /// The fill byte of a write event.
    fn byte_of(event: &Event) -> u8 {
        match event {
            Event::Host {
                request: HostRequest::Change(Change::Write { data, .. }),
                ..
            } => data[0],
            _ => panic!("not a write"),
        }
    }

    #[test]
    fn overlapping_writes_wait_in_order_and_the_compares_write_goes_first() {
        let mut fences = Fences::default();
        fences.fence(lun(2), 4096, 512);
        assert!(fences.must_wait(&write(2, 4096 + 511, 1, 0xa)), "overlaps");
        assert!(
            !fences.must_wait(&write(2, 4096 + 512, 512, 0)),
            "just after"
        );
        assert!(!fences.must_wait(&write(2, 0, 4096, 0)), "just before");
        assert!(!fences.must_wait(&write(3, 4096, 512, 0)), "another LUN");
        assert!(fences.must_wait(&compare(2, 4000, 200)), "a second compare");
        fences.park(write(2, 4096, 8192, 0xa));
        // A write that overlaps only a parked one waits behind it too.
        assert!(fences.must_wait(&write(2, 8192, 512, 0xb)));
        fences.park(write(2, 8192, 512, 0xb));
        assert!(fences.next_released().is_none(), "nothing before the lift");
        fences.lift(lun(2), 4096, Some(write(2, 4096, 512, 0xc)));
        let order: Vec<u8> = std::iter::from_fn(|| fences.next_released())
            .map(|e| byte_of(&e))
            .collect();
        assert_eq!(order, [0xc, 0xa, 0xb]);
        assert!(
            !fences.must_wait(&write(2, 4096, 512, 0)),
            "the fence is gone"
        );
    }
}
