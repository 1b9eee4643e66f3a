//! Helpers shared by the RAID integration tests: seeded random stripes.

#![allow(dead_code, reason = "each test binary uses its own subset")]

use wafer_raid::{BLOCK_SIZE, Block, RaidGroupGeometry, RaidType};
pub use wafer_rng::Rng;

/// A block of seeded random bytes.
pub fn random_block(rng: &mut Rng) -> Block {
    let mut block = [0u8; BLOCK_SIZE];
    rng.fill(&mut block);
    block
}

pub fn geometry(raid_type: RaidType, group_size: u16) -> RaidGroupGeometry {
    RaidGroupGeometry::new(raid_type, group_size, 64).expect("valid geometry")
}

/// A stripe of random data blocks with freshly encoded parity.
pub fn random_stripe(geometry: &RaidGroupGeometry, rng: &mut Rng) -> Vec<Block> {
    let mut stripe: Vec<Block> = (0..geometry.group_size())
        .map(|_| random_block(rng))
        .collect();
    geometry.encode_stripe(&mut stripe);
    stripe
}
