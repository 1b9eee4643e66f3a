//! The iSCSI front end's counters: the block operations its SCSI commands
//! asked the filer for, counted as the connections hand them over.
//!
//! A SCSI command (READ(10), WRITE(16), UNMAP, GET LBA STATUS, VERIFY,
//! COMPARE AND WRITE, PERSISTENT RESERVE IN/OUT, ...) becomes
//! one or more [`BlockOp`]s in `wafer-iscsi`; each is counted here once, by
//! kind, with the bytes a read or write asks to move, whatever its outcome.
//! Relaxed atomics: the counters order nothing, and `sysstat` (and so the
//! metrics) read a recent value of each.

use std::sync::atomic::{AtomicU64, Ordering};

use wafer_iscsi::BlockOp;

use crate::admin::IscsiCountersStatus;

/// Shared by every iSCSI connection.
#[derive(Debug, Default)]
pub(crate) struct IscsiCounters {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    trims: AtomicU64,
    allocation_queries: AtomicU64,
    verifies: AtomicU64,
    compare_and_writes: AtomicU64,
    reservations: AtomicU64,
}

impl IscsiCounters {
    /// Counts the operations of one command.
    pub(crate) fn count(&self, ops: &[BlockOp]) {
        let add = |counter: &AtomicU64, n: u64| {
            counter.fetch_add(n, Ordering::Relaxed);
        };
        for op in ops {
            match op {
                BlockOp::Read { length, .. } => {
                    add(&self.reads, 1);
                    add(&self.read_bytes, *length);
                }
                BlockOp::Write { data, .. } => {
                    add(&self.writes, 1);
                    add(&self.write_bytes, data.len() as u64);
                }
                BlockOp::Trim { .. } => add(&self.trims, 1),
                BlockOp::Allocation { .. } => add(&self.allocation_queries, 1),
                BlockOp::Verify { .. } => add(&self.verifies, 1),
                BlockOp::CompareAndWrite { .. } => add(&self.compare_and_writes, 1),
                BlockOp::ReserveIn { .. } | BlockOp::ReserveOut { .. } => {
                    add(&self.reservations, 1);
                }
            }
        }
    }

    /// The counters now, for `sysstat`.
    pub(crate) fn status(&self) -> IscsiCountersStatus {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        IscsiCountersStatus {
            reads: get(&self.reads),
            read_bytes: get(&self.read_bytes),
            writes: get(&self.writes),
            write_bytes: get(&self.write_bytes),
            trims: get(&self.trims),
            allocation_queries: get(&self.allocation_queries),
            verifies: get(&self.verifies),
            compare_and_writes: get(&self.compare_and_writes),
            reservations: get(&self.reservations),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_is_counted_by_kind_with_its_bytes() {
        let counters = IscsiCounters::default();
        counters.count(&[
            BlockOp::Read {
                offset: 0,
                length: 8192,
            },
            BlockOp::Write {
                offset: 0,
                data: vec![0; 512],
            },
            BlockOp::Trim {
                offset: 0,
                length: 4096,
            },
            BlockOp::Allocation {
                offset: 0,
                length: 4096,
            },
        ]);
        let status = counters.status();
        assert_eq!((status.reads, status.read_bytes), (1, 8192));
        assert_eq!((status.writes, status.write_bytes), (1, 512));
        assert_eq!((status.trims, status.allocation_queries), (1, 1));
    }
}
