//! What a sector read back from a stripe can be trusted to say, and the
//! parity block's own trailer. The CP's partial-stripe parity updates, the
//! scrub and the mount's resync of unfinished stripes all read sectors back
//! to compute parity from, and all must refuse one that a lost, torn or
//! misdirected write left behind: they share these rules.

use wafer_raid::{Dbn, DiskIndex};

use super::Sector;
use super::meta::PARITY_FILE;
use super::written::{LastWrite, WrittenSums};
use crate::format::{AGGREGATE_VOLUME, Identity, Trailer};
use crate::payload::Payload;
use crate::units::{CpCount, Fbn, Pvbn, Vvbn};

/// Whether the sector read back from block `dbn` of `disk` in `group` can be
/// trusted (see [`sector_is_sound`]).
pub(super) fn read_back_is_sound<P: Payload>(
    layout: &crate::aggregate::Layout,
    written: &WrittenSums,
    (group, disk, dbn): (usize, DiskIndex, u64),
    sector: Option<&Sector<P>>,
) -> bool {
    let last_write = written.last_write(layout.disk_id(group, disk), dbn);
    read_back_matches(layout, last_write, (group, disk, dbn), sector)
}

/// Whether the sector read back from block `dbn` of `disk` in `group` can be
/// trusted, `last_write` being what the filer takes its last write there to
/// be (see [`sector_is_sound`]).
pub(super) fn read_back_matches<P: Payload>(
    layout: &crate::aggregate::Layout,
    last_write: Option<LastWrite>,
    (group, disk, dbn): (usize, DiskIndex, u64),
    sector: Option<&Sector<P>>,
) -> bool {
    let home = layout.pvbn(group, disk, Dbn(dbn));
    sector_is_sound(sector, last_write, home, dbn)
}

/// What writing `sector` teaches: its content's checksum and its trailer's.
/// Every sector the filer writes carries a trailer; one that did not could
/// never be read back as this write, and is remembered so.
pub(super) fn last_write_of<P: Payload>(sector: &Sector<P>) -> LastWrite {
    LastWrite {
        content: P::checksum(&sector.data),
        trailer: Trailer::decode(&sector.trailer).map_or(0, |t| t.sum()),
    }
}

/// Whether a sector read back for a parity computation can be trusted: it is
/// what the filer last wrote there, content and trailer (when that is known),
/// and otherwise it was never written (zeros) or matches its own trailer's
/// checksum.
fn sector_is_sound<P: Payload>(
    sector: Option<&Sector<P>>,
    last_write: Option<LastWrite>,
    home: Option<Pvbn>,
    dbn: u64,
) -> bool {
    let Some(sector) = sector else { return false };
    let sum = P::checksum(&sector.data);
    let trailer = Trailer::decode(&sector.trailer).ok().filter(|trailer| {
        let here = match home {
            Some(pvbn) => trailer.identity.pvbn == pvbn,
            None => trailer.identity.file == PARITY_FILE && trailer.identity.fbn == Fbn(dbn),
        };
        trailer.matches(sum) && here
    });
    match (last_write, trailer) {
        // Every block the filer writes carries a trailer naming its place and
        // what it is: a lost write of the same content leaves the old trailer
        // (or none), which may name this place but not as the last write did.
        (Some(last), trailer) => trailer.is_some_and(|t| last.is(sum, &t)),
        // Nothing known of the last write: the trailer must be intact and
        // name this very place (a data disk's pvbn, or a parity block of this
        // stripe), or a misdirected write onto a block of unknown history
        // would be trusted; or the block was never written.
        (None, Some(_)) => true,
        (None, None) => Trailer::decode(&sector.trailer).is_err() && sector.data == P::zero(),
    }
}

/// A parity block with a trailer of its own, so scrubs and partial writes can
/// tell a damaged parity block from a sound one.
pub(super) fn parity_sector<P: Payload>(content: &P::Unit, dbn: u64) -> Sector<P> {
    let identity = Identity {
        pvbn: Pvbn(0),
        vvbn: Vvbn(0),
        volume: AGGREGATE_VOLUME,
        file: PARITY_FILE,
        fbn: Fbn(dbn),
        level: 0,
        cp: CpCount(0),
    };
    let data = P::from_unit(content.clone());
    Sector {
        trailer: Trailer::new(P::checksum(&data), identity).encode(),
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filer::meta::SUPERBLOCK_FILE;
    use crate::payload::Bytes;

    fn block_at(pvbn: u64) -> Sector<Bytes> {
        let data = Box::new([7u8; crate::BLOCK_SIZE]);
        let identity = Identity {
            pvbn: Pvbn(pvbn),
            vvbn: Vvbn(pvbn),
            volume: AGGREGATE_VOLUME,
            file: SUPERBLOCK_FILE,
            fbn: Fbn(0),
            level: 0,
            cp: CpCount(3),
        };
        Sector {
            trailer: Trailer::new(Bytes::checksum(&data), identity).encode(),
            data,
        }
    }

    fn written(sector: &Sector<Bytes>) -> Option<LastWrite> {
        Some(last_write_of(sector))
    }

    #[test]
    fn a_block_is_trusted_only_where_its_trailer_says_it_lives() {
        let home = Some(Pvbn(40));
        assert!(sector_is_sound(Some(&block_at(40)), None, home, 10));
        assert!(
            !sector_is_sound(Some(&block_at(41)), None, home, 10),
            "a misdirected write names another place"
        );
        let last = written(&block_at(40));
        assert!(sector_is_sound(Some(&block_at(40)), last, home, 10));
        let mut other = block_at(40);
        other.data[0] ^= 1;
        assert!(
            !sector_is_sound(Some(&block_at(40)), written(&other), home, 10),
            "not what the filer last wrote"
        );
        assert!(
            !sector_is_sound(Some(&block_at(41)), last, home, 10),
            "the content the filer last wrote, under a trailer it did not write"
        );
        let parity = parity_sector::<Bytes>(&[9u8; crate::BLOCK_SIZE], 10);
        assert!(sector_is_sound(Some(&parity), None, None, 10));
        assert!(
            !sector_is_sound(Some(&parity), None, None, 11),
            "another stripe's parity"
        );
        assert!(!sector_is_sound::<Bytes>(None, None, home, 10));
    }

    /// Seed 100530: a torn CP wrote a block as one file's, the redo after
    /// replay wrote the same content there as another's, and that write was
    /// lost. The old trailer is intact and names this place.
    #[test]
    fn the_content_last_written_under_a_stale_identity_is_not_trusted() {
        let home = Some(Pvbn(40));
        let stale = block_at(40);
        let mut identity = Trailer::decode(&stale.trailer).expect("a trailer").identity;
        identity.file = crate::units::FileId(1026);
        identity.cp = CpCount(24);
        let redo = Sector {
            trailer: Trailer::new(Bytes::checksum(&stale.data), identity).encode(),
            data: stale.data.clone(),
        };
        assert!(sector_is_sound(Some(&stale), None, home, 10));
        assert!(sector_is_sound(Some(&redo), written(&redo), home, 10));
        assert!(
            !sector_is_sound(Some(&stale), written(&redo), home, 10),
            "the last write's content under an identity it did not write"
        );
    }
}
