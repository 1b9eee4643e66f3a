//! Uses `G`, which `g` passes on from its child `inner` by a glob.
pub struct D(pub crate::g::G);
