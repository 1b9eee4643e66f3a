//! What the operator is told about the aggregate's background life.
//!
//! The engine changes state on its own: a RAID group degrades when a disk
//! fails and recovers when a reconstruction completes, a scrub ends with its
//! findings, a read meets a block that RAID cannot bring back. None of that
//! answers an administrator's command, so the server log is where it must
//! appear. [`Watch`] keeps the little it needs to notice a change (each
//! group's failed disks, the reconstruction and the scrub in progress, the
//! count of unrecoverable blocks) and, looked at after every event, returns
//! one log line per change: comparing a handful of values, cheap enough for
//! every event.

use wafer_core::Filer;
use wafer_core::filer::{RebuildStatus, ScrubStatus};

use crate::config::AggrConfig as DataConfig;

/// Unrecoverable reads named one by one in the log before the rest are only
/// counted: a client rereading a lost block must not flood it.
const NAMED_UNRECOVERABLE_READS: u64 = 100;

/// The state last reported.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    failed: Vec<usize>,
    rebuild: Option<RebuildStatus>,
    scrub: Option<ScrubStatus>,
    unrecoverable_blocks: u64,
    unrecoverable_reads: u64,
}

impl Watch {
    /// A watch that takes `filer`'s state as already known (the start
    /// banner has said it).
    pub(crate) fn of(filer: &Filer) -> Watch {
        Watch {
            failed: failed_counts(filer),
            rebuild: filer.rebuild_status(),
            scrub: filer.scrub_status(),
            unrecoverable_blocks: filer.counters().unrecoverable_blocks,
            unrecoverable_reads: 0,
        }
    }

    /// The log lines for what changed since the last look.
    pub(crate) fn changes(&mut self, filer: &Filer, config: &DataConfig) -> Vec<String> {
        let mut lines = self.group_states(filer, config);
        lines.extend(self.rebuild_change(filer, config));
        lines.extend(self.scrub_change(filer));
        let unrecoverable = filer.counters().unrecoverable_blocks;
        if unrecoverable > self.unrecoverable_blocks {
            lines.push(format!(
                "{} blocks could not be read even with RAID reconstruction (unrecoverable media \
                 errors; {unrecoverable} since the start)",
                unrecoverable - self.unrecoverable_blocks
            ));
            self.unrecoverable_blocks = unrecoverable;
        }
        lines
    }

    /// The line for a host request answered with an unrecoverable media
    /// error, while they are few enough to name.
    pub(crate) fn unrecoverable_read(&mut self, what: &str) -> Option<String> {
        self.unrecoverable_reads += 1;
        match self.unrecoverable_reads {
            n if n < NAMED_UNRECOVERABLE_READS => {
                Some(format!("{what} failed: unrecoverable media error"))
            }
            NAMED_UNRECOVERABLE_READS => Some(format!(
                "{what} failed: unrecoverable media error ({NAMED_UNRECOVERABLE_READS} such \
                 requests; further ones are counted, not logged)"
            )),
            _ => None,
        }
    }

    fn group_states(&mut self, filer: &Filer, config: &DataConfig) -> Vec<String> {
        let mut lines = Vec::new();
        let now = filer.failed_disks().iter().map(|set| set.len());
        for (group, (was, is)) in self.failed.iter_mut().zip(now).enumerate() {
            if *was != is {
                *was = is;
                lines.push(format!(
                    "aggregate {} rg{group}: {}",
                    config.aggregate,
                    group_state(is)
                ));
            }
        }
        lines
    }

    fn rebuild_change(&mut self, filer: &Filer, config: &DataConfig) -> Vec<String> {
        let now = filer.rebuild_status();
        let was = core::mem::replace(&mut self.rebuild, now);
        let started = |status: &RebuildStatus| {
            let name = slot_name(config, status.disk);
            format!("rg{}: reconstruction of {name} started", status.group)
        };
        match (was, now) {
            (None, Some(now)) => vec![started(&now)],
            (Some(ended), None) => vec![rebuild_ended(filer, config, &ended)],
            // One reconstruction ended and the next began in the same CP.
            (Some(was), Some(now)) if (was.group, was.disk) != (now.group, now.disk) => {
                vec![rebuild_ended(filer, config, &was), started(&now)]
            }
            _ => Vec::new(),
        }
    }

    fn scrub_change(&mut self, filer: &Filer) -> Option<String> {
        let now = filer.scrub_status();
        let was = core::mem::replace(&mut self.scrub, now);
        let (Some(before), Some(after)) = (was, now) else {
            return now
                .filter(|s| s.running)
                .map(|_| "aggr scrub started".into());
        };
        if !before.running && after.running {
            return Some("aggr scrub started".into());
        }
        (before.running && !after.running).then(|| scrub_ended(&after))
    }
}

fn failed_counts(filer: &Filer) -> Vec<usize> {
    filer.failed_disks().iter().map(|set| set.len()).collect()
}

/// ONTAP's words for a RAID group with `failed` disks out of service.
fn group_state(failed: usize) -> String {
    match failed {
        0 => "normal: every disk in service".into(),
        1 => "degraded: 1 disk failed or reconstructing; data is rebuilt from parity".into(),
        2 => "double degraded: 2 disks failed or reconstructing".into(),
        n => format!("failed: {n} disks out of service"),
    }
}

fn rebuild_ended(filer: &Filer, config: &DataConfig, ended: &RebuildStatus) -> String {
    let name = slot_name(config, ended.disk);
    let still_failed = filer
        .layout()
        .slot(ended.disk)
        .is_some_and(|slot| match slot {
            wafer_core::aggregate::Slot::Member { group, disk } => {
                filer.failed_disks()[group].contains(disk)
            }
            wafer_core::aggregate::Slot::Spare(_) => false,
        });
    match still_failed {
        false => format!(
            "rg{}: reconstruction of {name} complete ({} stripes)",
            ended.group, ended.stripes_total
        ),
        true => format!(
            "rg{}: reconstruction of {name} stopped at stripe {} of {} (no spare, or the spare \
             failed); the group stays degraded",
            ended.group, ended.stripes_done, ended.stripes_total
        ),
    }
}

fn scrub_ended(status: &ScrubStatus) -> String {
    let tally = status.tally;
    let how = match status.stripes_done >= status.stripes_total {
        true => "complete",
        false => "stopped",
    };
    format!(
        "aggr scrub {how}: {} of {} stripes verified, {} parity blocks rewritten, {} blocks \
         repaired, {} stripes left as found",
        tally.stripes_verified,
        status.stripes_total,
        tally.parity_rewritten,
        tally.blocks_repaired,
        tally.stripes_left_alone
    )
}

/// The name of the disk in slot `disk` now (after a spare took a failed
/// disk's place, the spare's).
fn slot_name(config: &DataConfig, disk: wafer_core::units::DiskId) -> String {
    config
        .slots()
        .get(disk.0 as usize)
        .map_or_else(|| format!("slot {}", disk.0), |s| s.disk.name.clone())
}
