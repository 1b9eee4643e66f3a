//! Published figures to hold the disk models against (device-models.md §1.11).
//!
//! Two kinds, per spindle-speed class, for random 4 KiB reads:
//!
//! - **Rules of thumb** for one outstanding request: the span of the figures
//!   the practitioners' notes give (noah.org "IOPS or TPS": 5400 rpm 80, 7200
//!   100, 10K 150, 15K 200; techpeoples.net: 10K 125, 15K 150; 50mu.net
//!   (2013): 7200 80, 10K 130, 15K 180; the `1 / (seek + latency)` estimate
//!   for a 10K VelociRaptor, 133; and the research's common values, ≈ 220 for
//!   15K, 120-140 for 10K, 50-80 for 7.2K SATA).
//! - **A simulation by queue depth** from the research (its own, marked
//!   \[INF\] there): Lee seek curve, exact rotation, 0.1 ms overhead, SATF at
//!   constant queue depth. It is an upper envelope: ideal reordering, no
//!   zoning.
//!
//! These are comparisons, not targets: nothing in the models is fitted to
//! them.

/// The figures for one spindle-speed class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassReference {
    /// The class, as the sources name it.
    pub class: &'static str,
    /// Lowest and highest rule-of-thumb IOPS at one outstanding request.
    pub rule_of_thumb_iops: (u32, u32),
    /// The research simulation's IOPS at queue depths 1, 2, 4, ... 64.
    pub simulated_iops: [(u32, u32); 7],
}

impl ClassReference {
    /// The research simulation's figure at `queue_depth`, if it ran that depth.
    pub fn simulated_iops_at(&self, queue_depth: u32) -> Option<u32> {
        self.simulated_iops
            .iter()
            .find(|&&(depth, _)| depth == queue_depth)
            .map(|&(_, iops)| iops)
    }
}

const CLASSES: [(u32, ClassReference); 3] = [
    (
        15_000,
        ClassReference {
            class: "15K rpm",
            rule_of_thumb_iops: (150, 220),
            simulated_iops: [
                (1, 181),
                (2, 218),
                (4, 261),
                (8, 314),
                (16, 383),
                (32, 465),
                (64, 562),
            ],
        },
    ),
    (
        10_000,
        ClassReference {
            class: "10K rpm",
            rule_of_thumb_iops: (120, 150),
            simulated_iops: [
                (1, 145),
                (2, 175),
                (4, 214),
                (8, 266),
                (16, 329),
                (32, 401),
                (64, 487),
            ],
        },
    ),
    (
        7_200,
        ClassReference {
            class: "7.2K rpm",
            rule_of_thumb_iops: (50, 100),
            simulated_iops: [
                (1, 78),
                (2, 95),
                (4, 115),
                (8, 139),
                (16, 170),
                (32, 208),
                (64, 254),
            ],
        },
    ),
];

/// The figures for drives spinning at `rpm`, if the research gives any.
pub fn for_rpm(rpm: u32) -> Option<&'static ClassReference> {
    CLASSES
        .iter()
        .find(|(class_rpm, _)| *class_rpm == rpm)
        .map(|(_, reference)| reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_has_its_figures() {
        assert_eq!(for_rpm(15_000).unwrap().simulated_iops_at(32), Some(465));
        assert_eq!(for_rpm(10_000).unwrap().rule_of_thumb_iops, (120, 150));
        assert_eq!(for_rpm(7_200).unwrap().simulated_iops_at(3), None);
        assert_eq!(for_rpm(5_400), None);
    }
}
