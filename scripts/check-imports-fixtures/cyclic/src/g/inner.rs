//! Closes a second cycle: `inner` uses `d`, which uses `G` of `inner`.
pub struct G(pub Option<Box<crate::d::D>>);
