//! Where a block lives on the platters, and when it passes under the head.
//!
//! The geometry is abstract but honest: it is derived from a datasheet's
//! capacity, surface count, spindle speed and outer and inner media rates.
//!
//! - **Blocks.** The media is formatted in 4 KiB blocks, as a 4Kn drive is; a
//!   512-byte-sector drive's track is rounded down to whole 4 KiB blocks,
//!   which loses under 3 % of its rate.
//! - **Zones.** Recording density along a track is constant, so a track holds
//!   blocks in proportion to its radius, and cylinders are evenly spaced in
//!   radius. The model splits the stroke into zones of equal cylinder count
//!   whose blocks per track fall linearly from the outer rate's to the inner
//!   rate's. The cylinder count is then whatever the capacity needs. The
//!   sequential rate against the fraction of the drive used follows
//!   device-models.md §1.4, `R(f) = R_max·√(1 − f·(1 − ρ²))`, in steps.
//! - **Mapping.** Block 0 is on the outermost cylinder. Blocks fill a track,
//!   then the same cylinder's next surface, then the next cylinder inward
//!   (DiskSim's conventional mapping).
//! - **Angles.** The spindle turns at a constant rate, at angle 0 at time 0,
//!   so the angle under the heads at time `t` is `t mod revolution`. A track
//!   of `n` blocks is cut into `n` slots; slot `k` spans `[k/n, (k+1)/n)` of a
//!   turn. A block's slot is its index on the track plus the track's skew
//!   offset, modulo `n`.
//! - **Skew.** Each head switch shifts the next track's first block by the
//!   *track skew*, each cylinder switch by the *cylinder skew*: the whole
//!   slots the arm needs for the switch (a write's, the slower), so a
//!   sequential run reaches the next track just before its first block comes
//!   round instead of a revolution late. Sequential streaming therefore runs
//!   at `n / (n + skew)` of the media rate, about 90 % for the drives modelled
//!   (device-models.md §1.4 works an example at 82 %).

use super::seek::ArmPosition;
use crate::BLOCK_BYTES;

/// Nanoseconds in a minute, for turning rpm into a revolution time.
const NS_PER_MINUTE: u64 = 60_000_000_000;

/// Blocks per track for a media rate in SI MB/s at a spindle speed: the bytes
/// one revolution carries, in whole 4 KiB blocks.
pub fn blocks_per_track(media_rate_mb_s: f64, rpm: u32) -> u32 {
    let bytes_per_revolution = media_rate_mb_s * 1e6 * 60.0 / f64::from(rpm);
    (bytes_per_revolution / BLOCK_BYTES as f64).floor() as u32
}

/// What the geometry is derived from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeometryInputs {
    /// Addressable blocks.
    pub capacity_blocks: u64,
    /// Spindle speed.
    pub rpm: u32,
    /// Recording surfaces (heads).
    pub surfaces: u32,
    /// Number of zones, outer to inner.
    pub zones: u32,
    /// Blocks per track of the outermost zone.
    pub outer_blocks_per_track: u32,
    /// Blocks per track of the innermost zone.
    pub inner_blocks_per_track: u32,
    /// Time the arm needs to continue a sequential run on the next surface.
    pub track_switch_ns: u64,
    /// Time the arm needs to continue a sequential run on the next cylinder.
    pub cylinder_switch_ns: u64,
}

/// A band of cylinders with the same number of blocks per track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone {
    /// First block of the zone.
    pub first_block: u64,
    /// First cylinder of the zone.
    pub first_cylinder: u64,
    /// Blocks on each track of the zone.
    pub blocks_per_track: u32,
    /// Slots the first block moves on to the next surface.
    pub track_skew: u32,
    /// Slots the first block moves on to the next cylinder.
    pub cylinder_skew: u32,
}

/// A block's physical place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Cylinder and surface.
    pub arm: ArmPosition,
    /// Angular slot of the block on its track.
    pub slot: u32,
    /// Blocks (slots) on the track.
    pub blocks_per_track: u32,
    /// Blocks from this one to the end of its track, itself included.
    pub blocks_left_on_track: u32,
}

/// The drive's layout and its spindle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    zones: Vec<Zone>,
    cylinders_per_zone: u64,
    surfaces: u32,
    capacity_blocks: u64,
    revolution_ns: u64,
}

impl Geometry {
    /// Lays out a drive.
    ///
    /// # Panics
    /// If an input is zero or the inner zone is denser than the outer: the
    /// parameter checks refuse such drives first.
    pub fn new(inputs: &GeometryInputs) -> Geometry {
        assert!(inputs.capacity_blocks > 0 && inputs.rpm > 0 && inputs.surfaces > 0);
        assert!(inputs.zones > 0 && inputs.inner_blocks_per_track > 0);
        assert!(inputs.inner_blocks_per_track <= inputs.outer_blocks_per_track);
        let revolution_ns = NS_PER_MINUTE / u64::from(inputs.rpm);
        let densities: Vec<u32> = (0..inputs.zones)
            .map(|z| zone_blocks_per_track(inputs, z))
            .collect();
        let blocks_per_zone_cylinder: u64 = densities
            .iter()
            .map(|&n| u64::from(n) * u64::from(inputs.surfaces))
            .sum();
        let cylinders_per_zone = inputs.capacity_blocks.div_ceil(blocks_per_zone_cylinder);
        let mut zones = Vec::with_capacity(densities.len());
        let mut first_block = 0;
        for (index, &blocks_per_track) in densities.iter().enumerate() {
            let skew = |switch_ns: u64| {
                let slots = (u128::from(switch_ns) * u128::from(blocks_per_track))
                    .div_ceil(u128::from(revolution_ns));
                (slots as u32).min(blocks_per_track - 1)
            };
            zones.push(Zone {
                first_block,
                first_cylinder: index as u64 * cylinders_per_zone,
                blocks_per_track,
                track_skew: skew(inputs.track_switch_ns),
                cylinder_skew: skew(inputs.cylinder_switch_ns),
            });
            first_block +=
                cylinders_per_zone * u64::from(inputs.surfaces) * u64::from(blocks_per_track);
        }
        Geometry {
            zones,
            cylinders_per_zone,
            surfaces: inputs.surfaces,
            capacity_blocks: inputs.capacity_blocks,
            revolution_ns,
        }
    }

    /// The zones, outer to inner.
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// Cylinders in the whole stroke.
    pub fn cylinders(&self) -> u64 {
        self.cylinders_per_zone * self.zones.len() as u64
    }

    /// Recording surfaces.
    pub fn surfaces(&self) -> u32 {
        self.surfaces
    }

    /// Addressable blocks. The innermost cylinders may hold a few more.
    pub fn capacity_blocks(&self) -> u64 {
        self.capacity_blocks
    }

    /// One spindle revolution.
    pub fn revolution_ns(&self) -> u64 {
        self.revolution_ns
    }

    /// The media rate of a zone in SI MB/s: one track per revolution.
    pub fn media_rate_mb_s(&self, zone: &Zone) -> f64 {
        (u64::from(zone.blocks_per_track) * BLOCK_BYTES) as f64 * 1e3 / self.revolution_ns as f64
    }

    /// The zone holding `block`.
    pub fn zone_of(&self, block: u64) -> &Zone {
        let index = self.zones.partition_point(|zone| zone.first_block <= block) - 1;
        &self.zones[index]
    }

    /// Where `block` is.
    pub fn locate(&self, block: u64) -> Location {
        debug_assert!(
            block < self.capacity_blocks,
            "block {block} past the end of the drive"
        );
        let zone = self.zone_of(block);
        let per_track = u64::from(zone.blocks_per_track);
        let offset_in_zone = block - zone.first_block;
        let track = offset_in_zone / per_track;
        let index = (offset_in_zone % per_track) as u32;
        let cylinder_in_zone = track / u64::from(self.surfaces);
        let surface = (track % u64::from(self.surfaces)) as u32;
        let skew = track_start_slot(zone, self.surfaces, cylinder_in_zone, surface);
        Location {
            arm: ArmPosition {
                cylinder: zone.first_cylinder + cylinder_in_zone,
                surface,
            },
            slot: ((u64::from(index) + skew) % per_track) as u32,
            blocks_per_track: zone.blocks_per_track,
            blocks_left_on_track: zone.blocks_per_track - index,
        }
    }

    /// Time from angle 0 to the start of `slot` on a track of `blocks_per_track`.
    fn slot_start_ns(&self, slot: u64, blocks_per_track: u32) -> u64 {
        // In 64 bits whenever the product fits, which it does for every real
        // drive: a 128-bit division costs a call to a slow helper.
        match slot.checked_mul(self.revolution_ns) {
            Some(angle) => angle / u64::from(blocks_per_track),
            None => {
                (u128::from(slot) * u128::from(self.revolution_ns) / u128::from(blocks_per_track))
                    as u64
            }
        }
    }

    /// How long a head arriving on the track at `at_ns` waits for the start
    /// of `slot` to come round.
    pub fn rotational_wait_ns(&self, at_ns: u64, slot: u32, blocks_per_track: u32) -> u64 {
        let angle_ns = at_ns % self.revolution_ns;
        let start_ns = self.slot_start_ns(u64::from(slot), blocks_per_track);
        (start_ns + self.revolution_ns - angle_ns) % self.revolution_ns
    }

    /// How long `count` consecutive slots from `slot` take to pass the head.
    pub fn transfer_ns(&self, slot: u32, count: u32, blocks_per_track: u32) -> u64 {
        let first = u64::from(slot);
        self.slot_start_ns(first + u64::from(count), blocks_per_track)
            - self.slot_start_ns(first, blocks_per_track)
    }

    /// How many whole slots from `slot` have passed the head `elapsed_ns`
    /// after the start of `slot` passed it.
    pub fn slots_passed(&self, slot: u32, elapsed_ns: u64, blocks_per_track: u32) -> u64 {
        let per_track = u128::from(blocks_per_track);
        let target = u128::from(self.slot_start_ns(u64::from(slot), blocks_per_track) + elapsed_ns);
        // The last slot boundary j with start(j) ≤ target.
        let last = ((target + 1) * per_track - 1) / u128::from(self.revolution_ns);
        (last - u128::from(slot)) as u64
    }
}

/// Blocks per track of zone `z`: a linear fall from outer to inner.
fn zone_blocks_per_track(inputs: &GeometryInputs, zone: u32) -> u32 {
    let span = inputs.outer_blocks_per_track - inputs.inner_blocks_per_track;
    match inputs.zones {
        1 => inputs.outer_blocks_per_track,
        zones => {
            let steps = zones - 1;
            inputs.outer_blocks_per_track - (span * zone + steps / 2) / steps
        }
    }
}

/// The slot of a track's first block: the skews accumulated since the zone's
/// first track, one track skew per surface change and one cylinder skew per
/// cylinder change.
fn track_start_slot(zone: &Zone, surfaces: u32, cylinder_in_zone: u64, surface: u32) -> u64 {
    let per_cylinder =
        u64::from(zone.cylinder_skew) + u64::from(surfaces - 1) * u64::from(zone.track_skew);
    (cylinder_in_zone * per_cylinder + u64::from(surface) * u64::from(zone.track_skew))
        % u64::from(zone.blocks_per_track)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cheetah() -> Geometry {
        Geometry::new(&GeometryInputs {
            capacity_blocks: 146_000_000_000 / BLOCK_BYTES,
            rpm: 15_000,
            surfaces: 4,
            zones: 24,
            outer_blocks_per_track: blocks_per_track(125.0, 15_000),
            inner_blocks_per_track: blocks_per_track(75.0, 15_000),
            track_switch_ns: 440_000,
            cylinder_switch_ns: 440_000,
        })
    }

    #[test]
    fn zones_run_from_the_outer_rate_to_the_inner() {
        let geometry = cheetah();
        let zones = geometry.zones();
        assert_eq!(zones.len(), 24);
        assert_eq!(geometry.revolution_ns(), 4_000_000);
        let outer = geometry.media_rate_mb_s(&zones[0]);
        let inner = geometry.media_rate_mb_s(zones.last().unwrap());
        assert!(outer <= 125.0 && outer > 125.0 - 1.1, "outer {outer} MB/s");
        assert!(inner <= 75.0 && inner > 75.0 - 1.1, "inner {inner} MB/s");
        assert!(
            zones
                .windows(2)
                .all(|pair| pair[0].blocks_per_track >= pair[1].blocks_per_track)
        );
        let last = zones.last().unwrap();
        let end =
            last.first_block + geometry.cylinders_per_zone * 4 * u64::from(last.blocks_per_track);
        assert!(
            end >= geometry.capacity_blocks(),
            "the zones hold the capacity"
        );
    }

    #[test]
    fn blocks_fill_tracks_then_surfaces_then_cylinders() {
        let geometry = cheetah();
        let per_track = u64::from(geometry.zones()[0].blocks_per_track);
        let first = geometry.locate(0);
        assert_eq!(
            first.arm,
            ArmPosition {
                cylinder: 0,
                surface: 0
            }
        );
        assert_eq!(first.blocks_left_on_track, per_track as u32);
        assert_eq!(geometry.locate(per_track - 1).blocks_left_on_track, 1);
        assert_eq!(
            geometry.locate(per_track).arm,
            ArmPosition {
                cylinder: 0,
                surface: 1
            }
        );
        assert_eq!(
            geometry.locate(4 * per_track).arm,
            ArmPosition {
                cylinder: 1,
                surface: 0
            }
        );
        let last = geometry.locate(geometry.capacity_blocks() - 1);
        assert!(last.arm.cylinder < geometry.cylinders());
    }

    #[test]
    fn skew_lets_a_sequential_run_switch_tracks_without_losing_a_turn() {
        let geometry = cheetah();
        let per_track = geometry.zones()[0].blocks_per_track;
        let last = geometry.locate(u64::from(per_track) - 1);
        let next = geometry.locate(u64::from(per_track));
        // The next track's first block starts `track_skew` slots after the
        // previous track's last block ends: long enough for the switch.
        let gap = (next.slot + per_track - (last.slot + 1) % per_track) % per_track;
        assert_eq!(gap, geometry.zones()[0].track_skew);
        let gap_ns = geometry.transfer_ns(0, gap, per_track);
        assert!(
            gap_ns >= 440_000 && gap_ns < 440_000 + geometry.revolution_ns() / u64::from(per_track)
        );
    }

    #[test]
    fn rotation_and_transfer_follow_the_spindle() {
        let geometry = cheetah();
        let n = geometry.zones()[0].blocks_per_track;
        assert_eq!(geometry.rotational_wait_ns(0, 0, n), 0);
        assert_eq!(geometry.rotational_wait_ns(1, 0, n), 4_000_000 - 1);
        assert_eq!(geometry.rotational_wait_ns(4_000_000 * 7, 0, n), 0);
        assert_eq!(geometry.transfer_ns(0, n, n), 4_000_000);
        // A run that wraps past slot n−1 takes as long as any other.
        assert!(
            geometry
                .transfer_ns(n - 1, 2, n)
                .abs_diff(geometry.transfer_ns(0, 2, n))
                <= 1
        );
        // After one block's time exactly one slot has passed; just before, none.
        let one = geometry.transfer_ns(3, 1, n);
        assert_eq!(geometry.slots_passed(3, one, n), 1);
        assert_eq!(geometry.slots_passed(3, one - 1, n), 0);
        assert_eq!(geometry.slots_passed(3, 4_000_000, n), u64::from(n));
    }
}
