//! Closes the cycle: `c` uses `a`, which uses `b`, which uses `c`.
pub struct C(pub Box<crate::a::A>);
