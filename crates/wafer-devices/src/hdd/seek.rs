//! Arm movement: seek time against distance, head switches, write settling.
//!
//! Datasheets give three seek times per operation: single track, average and
//! full stroke. Lee's three-point curve (DiskSim's `dm_param.tex`, "Lee's Seek
//! Equation") turns them into a time for every distance `x` in cylinders, out
//! of `N` cylinders:
//!
//! ```text
//! seek(0) = 0
//! seek(x) = a·√(x−1) + b·(x−1) + c            for x ≥ 1
//! a = (−10·track + 15·average − 5·full) / (3·√N)
//! b = (  7·track − 15·average + 8·full) / (3·N)
//! c = track
//! ```
//!
//! The square-root term is the accelerate/decelerate regime of short seeks,
//! the linear term the coast of long ones (Ruemmler & Wilkes 1994). The curve
//! passes through `track` at one cylinder and `full` at `N`, and its mean over
//! the distances between two uniformly random cylinders (a triangular
//! distribution: E\[x\] = N/3, E\[√x\] = 8/15·√N) is exactly `average`: the way
//! manufacturers define average seek (device-models.md §1.2). At `N/3` the
//! curve is somewhat above the average, since √ is concave.
//!
//! Reads and writes have separate curves, as datasheets give them: the write
//! curve includes the longer settle a write needs before it may start. A head
//! switch (to another surface of the same cylinder) costs the `head switch`
//! time, plus for a write that same extra settle (the write curve's
//! single-track time minus the read curve's). A seek that also changes
//! surface costs the larger of the two, since the new head settles during the
//! seek (DiskSim's `hplplus10` rule).

use crate::params::SeekSpec;
use crate::{Op, ms_to_ns};

/// Lee's curve for one operation, in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct SeekCurve {
    sqrt_ns: f64,
    linear_ns: f64,
    track_ns: f64,
    cylinders: u64,
}

impl SeekCurve {
    /// The curve through a datasheet's three points, for a drive of
    /// `cylinders` cylinders.
    pub fn lee(points: &SeekSpec, cylinders: u64) -> SeekCurve {
        let n = cylinders as f64;
        let (track, average, full) = (points.track_ms, points.average_ms, points.full_ms);
        let to_ns = 1e6;
        SeekCurve {
            sqrt_ns: (-10.0 * track + 15.0 * average - 5.0 * full) / (3.0 * n.sqrt()) * to_ns,
            linear_ns: (7.0 * track - 15.0 * average + 8.0 * full) / (3.0 * n) * to_ns,
            track_ns: track * to_ns,
            cylinders,
        }
    }

    /// Seek time over `distance` cylinders, in nanoseconds.
    pub fn time_ns(&self, distance: u64) -> u64 {
        debug_assert!(
            distance <= self.cylinders,
            "seek of {distance} cylinders on a drive of {}",
            self.cylinders
        );
        if distance == 0 {
            return 0;
        }
        let x = (distance - 1) as f64;
        let time_ns = self.sqrt_ns * x.sqrt() + self.linear_ns * x + self.track_ns;
        // Rounds half up, as `f64::round` does for the positive times a seek
        // takes, without the library call `round` needs: adding 0.5 is exact
        // for any time of half a nanosecond or more below 2^52 ns.
        (time_ns + 0.5) as u64
    }
}

/// Where the arm is: a cylinder and the surface whose head is active.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArmPosition {
    /// Cylinder, 0 at the outer edge.
    pub cylinder: u64,
    /// Surface (head) number.
    pub surface: u32,
}

/// The arm's timing: seek curves and head switches for reads and writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Mechanics {
    read: SeekCurve,
    write: SeekCurve,
    head_switch_read_ns: u64,
    head_switch_write_ns: u64,
}

impl Mechanics {
    /// The arm of a drive with `cylinders` cylinders, its read and write seek
    /// curves and its head switch time (for reads).
    pub fn new(
        read: &SeekSpec,
        write: &SeekSpec,
        head_switch_ms: f64,
        cylinders: u64,
    ) -> Mechanics {
        Mechanics {
            read: SeekCurve::lee(read, cylinders),
            write: SeekCurve::lee(write, cylinders),
            head_switch_read_ns: ms_to_ns(head_switch_ms),
            head_switch_write_ns: ms_to_ns(write_head_switch_ms(read, write, head_switch_ms)),
        }
    }

    /// The seek curve for `op`.
    pub fn curve(&self, op: Op) -> &SeekCurve {
        match op {
            Op::Read => &self.read,
            Op::Write => &self.write,
        }
    }

    /// Time to switch heads within a cylinder before `op`.
    pub fn head_switch_ns(&self, op: Op) -> u64 {
        match op {
            Op::Read => self.head_switch_read_ns,
            Op::Write => self.head_switch_write_ns,
        }
    }

    /// Time to move the arm from `from` to `to` and settle for `op`.
    pub fn positioning_ns(&self, op: Op, from: ArmPosition, to: ArmPosition) -> u64 {
        let distance = from.cylinder.abs_diff(to.cylinder);
        let switch = if from.surface == to.surface {
            0
        } else {
            self.head_switch_ns(op)
        };
        match distance {
            0 => switch,
            _ => self.curve(op).time_ns(distance).max(switch),
        }
    }
}

/// A write's head switch: the read head switch plus the extra settle a write
/// needs, the write curve's single-track time minus the read curve's.
fn write_head_switch_ms(read: &SeekSpec, write: &SeekSpec, head_switch_ms: f64) -> f64 {
    head_switch_ms + (write.track_ms - read.track_ms).max(0.0)
}

/// What a sequential run needs to continue on the next track: the time to
/// reach the next surface (a write's head switch) and the next cylinder (a
/// write's one-cylinder seek, or its head switch if longer). Track and cylinder
/// skew are laid out to hide them (see `geometry`). Neither depends on the
/// length of the stroke.
pub fn sequential_switch_ns(read: &SeekSpec, write: &SeekSpec, head_switch_ms: f64) -> (u64, u64) {
    let surface_ms = write_head_switch_ms(read, write, head_switch_ms);
    (
        ms_to_ns(surface_ms),
        ms_to_ns(write.track_ms.max(surface_ms)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHEETAH_15K7_READ: SeekSpec = SeekSpec {
        track_ms: 0.2,
        average_ms: 3.4,
        full_ms: 6.6,
    };
    const CYLINDERS: u64 = 107_500;

    fn ms(ns: u64) -> f64 {
        ns as f64 / 1e6
    }

    #[test]
    fn the_curve_passes_through_the_datasheet_points() {
        let curve = SeekCurve::lee(&CHEETAH_15K7_READ, CYLINDERS);
        assert_eq!(curve.time_ns(0), 0);
        assert!((ms(curve.time_ns(1)) - 0.2).abs() < 1e-6);
        assert!(
            (ms(curve.time_ns(CYLINDERS)) - 6.6).abs() < 0.01,
            "{}",
            ms(curve.time_ns(CYLINDERS))
        );
        // At a third of the stroke Lee's curve sits a little above the average
        // (√ is concave); within 10 % of it.
        let third = ms(curve.time_ns(CYLINDERS / 3));
        assert!(third > 3.4 && third < 3.4 * 1.1, "seek(N/3) = {third} ms");
    }

    #[test]
    fn the_mean_over_random_cylinder_pairs_is_the_datasheet_average() {
        // Two uniformly random cylinders are d apart with probability
        // 2(N−d)/N² (d ≥ 1), or 1/N (d = 0): the manufacturers' weighting.
        let n = 30_000u64;
        let curve = SeekCurve::lee(&CHEETAH_15K7_READ, n);
        let total: f64 = (1..n)
            .map(|d| 2.0 * (n - d) as f64 * curve.time_ns(d) as f64)
            .sum();
        let mean_ms = total / (n as f64 * n as f64) / 1e6;
        assert!(
            (mean_ms - 3.4).abs() < 0.034,
            "mean random seek {mean_ms} ms"
        );
    }

    #[test]
    fn seek_time_never_falls_with_distance() {
        let curve = SeekCurve::lee(&CHEETAH_15K7_READ, CYLINDERS);
        let times: Vec<u64> = (0..=CYLINDERS)
            .step_by(97)
            .map(|d| curve.time_ns(d))
            .collect();
        assert!(times.windows(2).all(|pair| pair[0] <= pair[1]));
    }

    #[test]
    fn writes_settle_longer_and_switches_overlap_seeks() {
        let write = SeekSpec {
            track_ms: 0.44,
            average_ms: 3.9,
            full_ms: 7.4,
        };
        let arm = Mechanics::new(&CHEETAH_15K7_READ, &write, 0.2, CYLINDERS);
        let at = |cylinder, surface| ArmPosition { cylinder, surface };
        assert_eq!(arm.positioning_ns(Op::Read, at(5, 0), at(5, 0)), 0);
        assert_eq!(arm.positioning_ns(Op::Read, at(5, 0), at(5, 1)), 200_000);
        // Write head switch: 0.2 ms plus the 0.24 ms extra settle.
        assert_eq!(arm.positioning_ns(Op::Write, at(5, 0), at(5, 1)), 440_000);
        assert_eq!(arm.positioning_ns(Op::Write, at(5, 0), at(6, 0)), 440_000);
        let long = arm.positioning_ns(Op::Read, at(0, 0), at(50_000, 3));
        assert_eq!(long, arm.curve(Op::Read).time_ns(50_000));
        assert_eq!(
            sequential_switch_ns(&CHEETAH_15K7_READ, &write, 0.2),
            (440_000, 440_000)
        );
    }
}
