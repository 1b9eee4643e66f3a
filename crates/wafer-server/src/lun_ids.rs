//! LUN IDs: the number `lun show -m` gives each LUN, stable for its life.
//!
//! An NBD client names an export, and the empty name (the protocol's default
//! export) names the LUN whose ID is 0. If IDs were positions in a list, they
//! would move as other LUNs come and go, and a client using the bare URI
//! would silently reach another LUN. So an ID is handed out once, when the
//! server first sees a LUN, recorded in `wafer.toml` (`next_lun_id` and one
//! `[[luns]]` entry per LUN), and never handed out again, even after its LUN
//! is destroyed: whatever a client remembers can only name that LUN or none.
//! The first LUN of a new data directory, `/vol/vol0/lun0`, gets 0, and is
//! the default export for as long as it lives; once it is destroyed there is
//! no default export (a new LUN at the same path is a new LUN, with a new ID).
//!
//! The engine's own identity of a LUN is its volume and inode, and inodes are
//! reused; a LUN is recorded by its path and inode together. The record
//! follows the filer rather than the admin requests: after every change and
//! at every start the LUNs the filer holds are compared with the records, a
//! LUN without one gets the next ID and a record whose LUN is gone is
//! dropped. So a change replayed from the NVLog after a crash, a restore
//! that brings back LUNs destroyed since its snapshot, and a directory from
//! before IDs were recorded all come out right.

use serde::{Deserialize, Serialize};

/// One LUN's recorded ID.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LunRecord {
    /// `/vol/VOLUME/LUN`.
    pub(crate) path: String,
    /// Its inode in the volume.
    pub(crate) inode: u32,
    /// Its LUN ID.
    pub(crate) id: u32,
}

/// A LUN as the filer holds it now: its path and inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LunNow {
    pub(crate) path: String,
    pub(crate) inode: u32,
}

/// Brings `records` in line with the LUNs `present`: records of LUNs gone
/// are dropped, and each LUN without a record gets ID `*next` (which then
/// moves on), in the order given. Returns whether anything changed.
pub(crate) fn reconcile(next: &mut u32, records: &mut Vec<LunRecord>, present: &[LunNow]) -> bool {
    let before = records.len();
    records.retain(|r| present.iter().any(|l| is(r, l)));
    let mut changed = records.len() != before;
    for lun in present {
        if !records.iter().any(|r| is(r, lun)) {
            records.push(LunRecord {
                path: lun.path.clone(),
                inode: lun.inode,
                id: *next,
            });
            *next += 1;
            changed = true;
        }
    }
    changed
}

/// The ID recorded for the LUN at `path` with `inode`.
pub(crate) fn id_of(records: &[LunRecord], path: &str, inode: u32) -> Option<u32> {
    records
        .iter()
        .find(|r| r.path == path && r.inode == inode)
        .map(|r| r.id)
}

/// Checks that IDs are below `next` and used once, and LUNs recorded once.
pub(crate) fn validate(next: u32, records: &[LunRecord]) -> Result<(), String> {
    for (n, record) in records.iter().enumerate() {
        if record.id >= next {
            return Err(format!(
                "LUN {} has ID {}, but next_lun_id is {next}",
                record.path, record.id
            ));
        }
        let earlier = &records[..n];
        if earlier
            .iter()
            .any(|r| r.id == record.id || r.path == record.path)
        {
            return Err(format!(
                "LUN {} or its ID {} is recorded twice",
                record.path, record.id
            ));
        }
    }
    Ok(())
}

fn is(record: &LunRecord, lun: &LunNow) -> bool {
    record.path == lun.path && record.inode == lun.inode
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lun(path: &str, inode: u32) -> LunNow {
        LunNow {
            path: path.into(),
            inode,
        }
    }

    #[test]
    fn ids_are_handed_out_once_and_kept_while_other_luns_come_and_go() {
        let (mut next, mut records) = (0, Vec::new());
        let a = lun("/vol/vol0/lun0", 64);
        let b = lun("/vol/vol0/b", 65);
        assert!(reconcile(&mut next, &mut records, &[a.clone(), b.clone()]));
        assert_eq!(id_of(&records, &a.path, a.inode), Some(0));
        assert_eq!(id_of(&records, &b.path, b.inode), Some(1));
        assert!(!reconcile(&mut next, &mut records, &[a.clone(), b.clone()]));

        // a goes; c takes its inode, and a new LUN takes a's path: both are
        // new LUNs, and no ID is used again.
        let c = lun("/vol/vol0/c", 64);
        assert!(reconcile(&mut next, &mut records, &[b.clone(), c.clone()]));
        assert_eq!(id_of(&records, &a.path, a.inode), None);
        assert_eq!(id_of(&records, &b.path, b.inode), Some(1));
        assert_eq!(id_of(&records, &c.path, c.inode), Some(2));
        let again = lun("/vol/vol0/lun0", 66);
        reconcile(&mut next, &mut records, &[b, c, again.clone()]);
        assert_eq!(id_of(&records, &again.path, again.inode), Some(3));
        assert_eq!(next, 4);
        validate(next, &records).expect("consistent");
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let record = |path: &str, id| LunRecord {
            path: path.into(),
            inode: 64,
            id,
        };
        assert!(validate(1, &[record("/vol/v/a", 1)]).is_err());
        assert!(validate(3, &[record("/vol/v/a", 1), record("/vol/v/b", 1)]).is_err());
        assert!(validate(3, &[record("/vol/v/a", 1), record("/vol/v/a", 2)]).is_err());
        assert!(validate(3, &[record("/vol/v/a", 1), record("/vol/v/b", 2)]).is_ok());
    }
}
